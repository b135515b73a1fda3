package p

// Before is parsed whole: the syntax error comes after it.
func Before(x int) int {
	if x > 0 {
		return x
	}
	return -x
}

// Lost has a broken parameter list: go/parser recovers no body for it.
func Lost( int {
	return 1
}

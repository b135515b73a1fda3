package p

// Max is in a file that parses.
func Max(a, b int) int {
	if a > b {
		return a
	}
	return b
}

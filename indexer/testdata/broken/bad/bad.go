// Package bad has a type error; the indexer must still record it.
package bad

// Holder is well typed.
type Holder struct{ N int }

// Value returns a string where an int is declared.
func (h Holder) Value() int {
	return "not an int"
}

// Fine is well typed.
func Fine() int { return 1 }

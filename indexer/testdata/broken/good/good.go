// Package good loads without errors.
package good

// Answer is well typed.
func Answer() int { return 42 }

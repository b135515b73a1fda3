// Package good loads cleanly; its callers are in a package with a type error
// and in one without errors.
package good

// Add adds.
func Add(a, b int) int { return a + b }

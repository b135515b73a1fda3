// Package user has no error of its own but imports the broken package, so
// its type information is incomplete and it must not count as covered.
package user

import "example.com/broken/bad"

// UseFine calls into the broken package.
func UseFine() int { return bad.Fine() }

// Package p has a file with more than ten syntax errors: go/parser stops
// at the eleventh and returns an empty file unless asked for all errors.
package p

// Sign has a body before the errors.
func Sign(x int) int {
	if x > 0 {
		return 1
	}
	if x < 0 {
		return -1
	}
	return 0
}

var v0 = )
var v1 = )
var v2 = )
var v3 = )
var v4 = )
var v5 = )
var v6 = )
var v7 = )
var v8 = )
var v9 = )
var v10 = )
var v11 = )

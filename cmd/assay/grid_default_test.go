//go:build !grid

package main

// gridCombination is one language × profile of the matrix grid.
type gridCombination struct{ language, profile string }

// gridExtra is empty in the default test run: the rest of the grid runs with -tags grid (grid_test.go).
var gridExtra []gridCombination

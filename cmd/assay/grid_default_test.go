//go:build !grid

package main

// gridCombination is one language × profile of the matrix grid.
type gridCombination struct{ language, profile string }

// gridExtra is empty in the default test run: the rest of the grid runs with -tags grid (grid_test.go).
var gridExtra []gridCombination

// matrixFileCases are the cases of TestMatrixFileTwoProvidersCasesRepeatTwo's matrix file: in the
// default test run one, which composes providers, cases and repeats (2 x 1 x 2 = 4 cases) on the
// paths three would; -tags grid runs three (grid_test.go).
var matrixFileCases = []string{"pipeline"}

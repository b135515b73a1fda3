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

// matrixFileRepeatFlag: in the default test run the matrix file leaves repeat out and the command
// gives --repeat 2, the one-axis shortcut, so that the run is also the --repeat flag's end-to-end
// test; -tags grid sets repeat: 2 in the file (grid_test.go), which harness's matrix file tests
// read into each cell.
const matrixFileRepeatFlag = true

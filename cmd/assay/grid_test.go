//go:build grid

package main

// gridCombination is one language × profile of the matrix grid.
type gridCombination struct{ language, profile string }

// gridExtra is the rest of the grid, run with -tags grid (as .ci/run does): with the other
// package's test, every catalog case in each of the four language × profile combinations.
var gridExtra = []gridCombination{{"go", "single-file"}}

// matrixFileCases are the cases of TestMatrixFileTwoProvidersCasesRepeatTwo's matrix file: with
// -tags grid, three (2 providers x 3 cases x repeat 2 = 12 cases).
var matrixFileCases = []string{"sequential", "pipeline", "parallel"}

// matrixFileRepeatFlag: with -tags grid the matrix file sets repeat: 2 itself.
const matrixFileRepeatFlag = false

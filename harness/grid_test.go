//go:build grid

package harness

// gridCombination is one language × profile of the matrix grid.
type gridCombination struct{ language, profile string }

// gridExtra is the rest of the grid, run with -tags grid (as .ci/run does): with the other
// package's test, every catalog case in each of the four language × profile combinations.
var gridExtra = []gridCombination{{"python", "standard"}}

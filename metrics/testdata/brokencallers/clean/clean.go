// Package clean loads cleanly and calls good.Add.
package clean

import "example.com/brokencallers/good"

// Twice calls good.Add.
func Twice(x int) int { return good.Add(x, x) }

// Package bad has a type error; two of its functions call good.Add.
package bad

import "example.com/brokencallers/good"

// Sum calls good.Add.
func Sum() int { return good.Add(1, 2) }

// Broken calls good.Add and has a type error.
func Broken() int {
	var s string = good.Add(3, 4)
	return len(s)
}

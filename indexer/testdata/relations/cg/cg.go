// Package cg calls C.
package cg

/*
static int add(int a, int b) { return a + b; }
*/
import "C"

// Add calls the C function add.
func Add(a, b int) int { return int(C.add(C.int(a), C.int(b))) }

// Twice calls Add.
func Twice(a int) int { return Add(a, a) }

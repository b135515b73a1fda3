package graph

import (
	"fmt"
	"testing"
)

func TestTotal(t *testing.T) {
	if got := Total([]Sizer{&Node{size: 2}}); got != 2 {
		t.Fatalf("Total = %d", got)
	}
}

func ExampleTwice() {
	fmt.Println(Twice())
	// Output: 2
}

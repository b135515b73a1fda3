// Package graph exercises every relation the indexer records.
package graph

import "fmt"

// Named has a name.
type Named interface{ Name() string }

// Sizer embeds Named.
type Sizer interface {
	Named
	Size() int
}

// Base is embedded by Node.
type Base struct{ id int }

// ID reads Base's field.
func (b *Base) ID() int { return b.id }

// Node embeds Base.
type Node struct {
	Base
	label string
	size  int
	hook  func(string) string
}

// Name reads label.
func (n *Node) Name() string { return n.label }

// Size reads size and Base's promoted field id.
func (n *Node) Size() int { return n.size + n.id }

// Describe calls Name on its receiver and Base's promoted method ID.
func (n *Node) Describe() string {
	return fmt.Sprintf("%s#%d", n.Name(), n.ID())
}

// Handler takes the method value n.Name without calling it.
func (n *Node) Handler() func() string { return n.Name }

// Apply calls the func-valued field hook.
func (n *Node) Apply(s string) string { return n.hook(s) }

// Later reads size inside a closure.
func (n *Node) Later() func() int {
	return func() int { return n.size }
}

// Total calls Size through the interface.
func Total(items []Sizer) int {
	t := 0
	for _, it := range items {
		t += it.Size()
	}
	return t
}

// Run calls a func value.
func Run(f func() int) int { return f() }

// Twice passes a closure that calls another closure immediately.
func Twice() int {
	return Run(func() int {
		return func() int { return 2 }()
	})
}

// Box is generic.
type Box[T any] struct{ v T }

// Get reads v through a generic receiver.
func (b *Box[T]) Get() T { return b.v }

// Make instantiates Box.
func Make[T any](v T) *Box[T] { return &Box[T]{v: v} }

// UseBox instantiates Make and calls Get.
func UseBox() int { return Make(3).Get() }

var _ Sizer = (*Node)(nil)

package jsondiff

import (
	"testing"
)

func TestFirstNamesTheFirstDifferingFieldInCanonicalOrder(t *testing.T) {
	for _, c := range []struct {
		name, a, b, pointer string
		inA, inB            bool
		equal               bool
	}{
		{name: "equal values in another key order", a: `{"b":1,"a":[1,2]}`, b: `{"a":[1,2],"b":1}`, equal: true},
		{name: "a nested string", a: `{"messages":[{"role":"user","content":"x"}]}`, b: `{"messages":[{"role":"user","content":"y"}]}`,
			pointer: "/messages/0/content", inA: true, inB: true},
		{name: "keys in RFC 8785 order: a before b", a: `{"b":1,"a":1}`, b: `{"b":2,"a":2}`, pointer: "/a", inA: true, inB: true},
		{name: "a member only in b", a: `{"a":1}`, b: `{"a":1,"z/~":2}`, pointer: "/z~1~0", inB: true},
		{name: "an element only in a", a: `[1,2,3]`, b: `[1,2]`, pointer: "/2", inA: true},
		{name: "kinds differ", a: `{"a":{"x":1}}`, b: `{"a":"x"}`, pointer: "/a", inA: true, inB: true},
		{name: "numbers by their text", a: `{"a":1.0}`, b: `{"a":1}`, pointer: "/a", inA: true, inB: true},
		{name: "null differs from absent", a: `{"a":null}`, b: `{}`, pointer: "/a", inA: true},
	} {
		t.Run(c.name, func(t *testing.T) {
			d, found := FirstBytes([]byte(c.a), []byte(c.b))
			if found == c.equal {
				t.Fatalf("found %v (%+v), want equal=%v", found, d, c.equal)
			}
			if c.equal {
				return
			}
			if d.Pointer != c.pointer || d.InA != c.inA || d.InB != c.inB {
				t.Errorf("got %q (inA %v, inB %v), want %q (%v, %v)", d.Pointer, d.InA, d.InB, c.pointer, c.inA, c.inB)
			}
		})
	}
}

func TestWalkReportsEveryDifferenceAndStops(t *testing.T) {
	a, _ := Decode([]byte(`{"t":1,"u":{"v":2,"w":3},"x":[1]}`))
	b, _ := Decode([]byte(`{"t":2,"u":{"v":2,"w":4},"x":[1,5]}`))
	var got []string
	Walk(a, b, func(d Difference) bool { got = append(got, d.Pointer); return true })
	if want := []string{"/t", "/u/w", "/x/1"}; len(got) != 3 || got[0] != want[0] || got[1] != want[1] || got[2] != want[2] {
		t.Fatalf("differences %v, want %v", got, want)
	}
	n := 0
	Walk(a, b, func(Difference) bool { n++; return false })
	if n != 1 {
		t.Errorf("Walk went on after fn returned false: %d calls", n)
	}
	if toks := Tokens("/z~1~0/0"); len(toks) != 2 || toks[0] != "z/~" || toks[1] != "0" {
		t.Errorf("Tokens: %q", toks)
	}
}

func TestNotJSONIsComparedWhole(t *testing.T) {
	if _, found := FirstBytes([]byte("data: x"), []byte("data: x")); found {
		t.Error("equal non-JSON bytes reported different")
	}
	d, found := FirstBytes([]byte("data: x"), []byte("data: y"))
	if !found || d.Pointer != "" || d.A != "data: x" {
		t.Errorf("got %+v", d)
	}
}

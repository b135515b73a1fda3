package jsonkeys

import "testing"

func TestDuplicate(t *testing.T) {
	for _, c := range []struct {
		data, key string
		dup       bool
	}{
		{`{"a":1,"b":2}`, "", false},
		{`[{"a":1},{"a":2},{"b":{"c":1,"d":[{"c":1}]}}]`, "", false}, // the same key in different objects
		{`{"a":1,"a":2}`, "a", true},
		{`{"x":{"b":[1,{"c":1,"c":null}]}}`, "c", true}, // at depth, inside a list
		{`{"a":{"a":1},"b":1,"b":2}`, "b", true},
		{`"a"`, "", false},
	} {
		key, dup := Duplicate([]byte(c.data))
		if key != c.key || dup != c.dup {
			t.Errorf("%s: (%q, %v), want (%q, %v)", c.data, key, dup, c.key, c.dup)
		}
	}
}

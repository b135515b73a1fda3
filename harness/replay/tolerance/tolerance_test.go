package tolerance

import (
	"errors"
	"testing"
)

func TestLookupNamesVersions(t *testing.T) {
	for _, name := range []string{"exact", "exact@1", "volatile", "volatile@1"} {
		if _, err := Lookup(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	if _, err := Lookup("exact@2"); !errors.Is(err, ErrVersion) {
		t.Errorf("exact@2: %v, want ErrVersion", err)
	}
	for _, name := range []string{"loose", "exact@x", "exact@0", ""} {
		if _, err := Lookup(name); !errors.Is(err, ErrUnknown) {
			t.Errorf("%q: %v, want ErrUnknown", name, err)
		}
	}
}

func TestVolatileIsWiderThanExactAndNotTheOtherWay(t *testing.T) {
	if wider, more := Volatile.Wider(Exact); !wider || len(more) == 0 {
		t.Errorf("volatile must be wider than exact (%v %v)", wider, more)
	}
	if wider, more := Exact.Wider(Volatile); wider {
		t.Errorf("exact is not wider than volatile: %v", more)
	}
	if wider, _ := Exact.Wider(Exact); wider {
		t.Error("a policy is not wider than itself")
	}
}

func TestClassifyPlaces(t *testing.T) {
	for _, c := range []struct {
		p            Policy
		typ, pointer string
		want         Treatment
		field        string
	}{
		{Exact, "member_started", "/time", Ignored, "event time"},
		{Exact, "provider_exchange", "/payload/latency_ms", Ignored, "latency_ms"},
		{Exact, "provider_exchange", "/payload/request_sha256", Compared, ""},
		{Exact, "checkpoint", "/turn/result/duration_ns", Ignored, "duration_ns"},
		{Exact, "tool_result", "/payload/receipt/time", Compared, ""},
		{Volatile, "tool_result", "/payload/receipt/time", Tolerated, "receipt time"},
		{Volatile, "member_started", "/time", Tolerated, "event time"},
		{Volatile, "member_started", "/payload/dir", Compared, ""},
		{Volatile, "member_completed", "/payload/latency_ms", Compared, ""},
	} {
		f, got := c.p.Classify(c.typ, c.pointer)
		if got != c.want || f.Name != c.field {
			t.Errorf("%s %s %s: %v %q, want %v %q", c.p.ID(), c.typ, c.pointer, got, f.Name, c.want, c.field)
		}
	}
	if s := Exact.Sources(); len(s) != 1 || s[0] != "wall_clock" {
		t.Errorf("exact ignores readings of %v", s)
	}
}

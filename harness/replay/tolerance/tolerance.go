// Package tolerance holds the replay tolerance policies: named, versioned values that say which
// differences between a recorded trace and its replay (or a second recording) a replay verdict may
// allow. A run binds its policy's name in its envelope before it executes (RISKS.md R07: a
// tolerance is never widened after the outcome is known); replay compares under that policy only.
//
// A policy treats every compared place (an event type and a JSON Pointer in the compared document,
// docs/replay.md) in one of three ways:
//
//   - compared: the two values must be equal, or the replay is a mismatch;
//   - ignored: left out of the comparison, because it is a reading of an entropy source the run
//     declared (the replay checks the envelope declares it) that no replay can reproduce — the
//     replaying process's own clock;
//   - tolerated: compared, and a difference is allowed: the verdict is within_tolerance and names
//     the field, where it first differed, how many places did and by how much.
//
// Adding a policy is adding one value to Policies, with its test and a line in docs/replay.md.
package tolerance

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/assay-audit/assay/internal/jsondiff"
)

// Field is one kind of compared place a policy names.
type Field struct {
	// Name is how verdicts name the field ("event time", "latency_ms").
	Name string
	// Doc says what it is and why it may differ.
	Doc string
	// Source is the entropy source whose readings it holds ("wall_clock"); a policy may ignore a
	// field only when the run's envelope declares its source.
	Source string
	// Unit is what a difference is measured in: "seconds" (RFC 3339 times), "milliseconds",
	// "nanoseconds", or "" (not measured).
	Unit string
	// Places are the places the field occupies: "TYPE POINTER", TYPE an event type or "*",
	// POINTER an RFC 6901 pointer whose tokens may be "*" (any one token) or "**" (any number).
	Places []string
}

// Matches reports whether the place (event type, pointer) is one of the field's.
func (f Field) Matches(eventType, pointer string) bool {
	for _, p := range f.Places {
		typ, ptr, _ := strings.Cut(p, " ")
		if (typ == "*" || typ == eventType) && glob(jsondiff.Tokens(ptr), jsondiff.Tokens(pointer)) {
			return true
		}
	}
	return false
}

func glob(pat, toks []string) bool {
	if len(pat) == 0 {
		return len(toks) == 0
	}
	if pat[0] == "**" {
		for i := 0; i <= len(toks); i++ {
			if glob(pat[1:], toks[i:]) {
				return true
			}
		}
		return false
	}
	return len(toks) > 0 && (pat[0] == "*" || pat[0] == toks[0]) && glob(pat[1:], toks[1:])
}

// The fields the policies name.
var (
	// EventTime is each event's time: when the store appended it.
	EventTime = Field{Name: "event time", Source: "wall_clock", Unit: "seconds", Places: []string{"* /time"},
		Doc: "the time each event was recorded: the recording process's clock"}
	// Latency is a provider exchange's latency as the client measured it.
	Latency = Field{Name: "latency_ms", Source: "wall_clock", Unit: "milliseconds", Places: []string{"provider_exchange /payload/latency_ms"},
		Doc: "the wall time of a provider request, measured by the client"}
	// Duration is a member turn's duration, inside a durable run's checkpoint states.
	Duration = Field{Name: "duration_ns", Source: "wall_clock", Unit: "nanoseconds", Places: []string{"checkpoint /**/duration_ns"},
		Doc: "a member turn's wall time, measured by the runtime and kept in checkpoint states"}
	// ApprovalExpiry is when an approval an intent consumed expires (now plus a time to live, unless
	// the grant named its expiry).
	ApprovalExpiry = Field{Name: "approval expires_at", Source: "wall_clock", Unit: "seconds", Places: []string{"tool_call /payload/approval/expires_at"},
		Doc: "the expiry of the approval a tool call consumed, computed from the clock when the grant named none"}
	// ReceiptTime is when an effect backend says it recorded a receipt.
	ReceiptTime = Field{Name: "receipt time", Source: "wall_clock", Unit: "seconds", Places: []string{"tool_result /payload/receipt/time"},
		Doc: "the time an effect backend recorded a receipt, as the backend reported it"}
)

// clock are the readings of the replaying process's own clock.
var clock = []Field{EventTime, Latency, Duration, ApprovalExpiry}

// Policy is a named, versioned tolerance policy.
type Policy struct {
	Name    string
	Version int
	Doc     string
	// Ignored fields are left out of the comparison; Tolerated fields are compared and may differ.
	Ignored, Tolerated []Field
}

// ID is the policy's "name@version".
func (p Policy) ID() string { return p.Name + "@" + strconv.Itoa(p.Version) }

// The policies.
var (
	// Exact: everything the recorded evidence determines must be re-derived identically. The
	// replaying process's clock readings are not compared: they measure the replay, not what it
	// re-derives, and the run declared the wall clock as an entropy source.
	Exact = Policy{Name: "exact", Version: 1, Ignored: clock,
		Doc: "every compared field equal; the replaying process's clock readings (event times, latencies, turn durations, " +
			"approval expiries computed from the clock) are not compared"}
	// Volatile: as exact, but timestamps, latencies and durations are compared and allowed to
	// differ — the replaying clock's readings and the times in recorded content (receipt times) —
	// and every difference is reported with its size.
	Volatile = Policy{Name: "volatile", Version: 1, Tolerated: append(slices.Clone(clock), ReceiptTime),
		Doc: "timestamps, latencies and durations may differ, wherever they occur, and each difference is reported " +
			"with its size; everything else must be equal"}
)

// Policies returns every policy this build knows, narrowest first; a new slice on every call.
func Policies() []Policy { return []Policy{Exact, Volatile} }

// Names returns the policies' names.
func Names() []string {
	var out []string
	for _, p := range Policies() {
		out = append(out, p.Name)
	}
	return out
}

// Errors of Lookup.
var (
	// ErrUnknown: no policy has the name.
	ErrUnknown = errors.New("unknown replay tolerance policy")
	// ErrVersion: the policy is known, in another version than this build's.
	ErrVersion = errors.New("replay tolerance policy version not supported by this build")
)

// Lookup returns the policy named name: "exact", or "exact@1" naming the version (a bare name is
// version 1, what runs recorded before versions were written record). It returns ErrUnknown or
// ErrVersion (wrapped, naming the versions) otherwise.
func Lookup(name string) (Policy, error) {
	base, ver, versioned := strings.Cut(name, "@")
	version := 1
	if versioned {
		v, err := strconv.Atoi(ver)
		if err != nil || v < 1 {
			return Policy{}, fmt.Errorf("%w: %q (want NAME or NAME@VERSION; known: %s)", ErrUnknown, name, strings.Join(Names(), ", "))
		}
		version = v
	}
	for _, p := range Policies() {
		if p.Name != base {
			continue
		}
		if p.Version != version {
			return Policy{}, fmt.Errorf("%w: %s is version %d, this build honours %s", ErrVersion, name, version, p.ID())
		}
		return p, nil
	}
	return Policy{}, fmt.Errorf("%w: %q (known: %s)", ErrUnknown, name, strings.Join(Names(), ", "))
}

// Treatment is how a policy treats a place.
type Treatment int

// Treatments.
const (
	Compared Treatment = iota
	Ignored
	Tolerated
)

// Classify returns how p treats the place, with the field it belongs to (zero for Compared).
func (p Policy) Classify(eventType, pointer string) (Field, Treatment) {
	for _, f := range p.Ignored {
		if f.Matches(eventType, pointer) {
			return f, Ignored
		}
	}
	for _, f := range p.Tolerated {
		if f.Matches(eventType, pointer) {
			return f, Tolerated
		}
	}
	return Field{}, Compared
}

// allows is every field whose difference p does not turn into a mismatch.
func (p Policy) allows() []string {
	var out []string
	for _, f := range append(slices.Clone(p.Ignored), p.Tolerated...) {
		out = append(out, f.Name)
	}
	return out
}

// Wider reports whether p allows a difference q does not: replaying a run bound to q under p
// would accept what its binding rejects (R07). It names the fields.
func (p Policy) Wider(q Policy) (bool, []string) {
	mine := q.allows()
	var more []string
	for _, f := range p.allows() {
		if !slices.Contains(mine, f) {
			more = append(more, f)
		}
	}
	return len(more) > 0, more
}

// Sources returns the entropy sources whose readings p ignores: the envelope must declare them.
func (p Policy) Sources() []string {
	var out []string
	for _, f := range p.Ignored {
		if !slices.Contains(out, f.Source) {
			out = append(out, f.Source)
		}
	}
	return out
}

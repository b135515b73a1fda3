package metrics

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strconv"
	"strings"
)

// Kind says how a value was obtained. Only "measured" values are
// measurements; a "proxy" approximates the metric (for example betweenness
// from sampled sources); "unavailable" has no value (NULL, never 0) and a
// reason.
type Kind string

// The kinds of metric values.
const (
	Measured    Kind = "measured"
	Proxy       Kind = "proxy"
	Unavailable Kind = "unavailable"
)

// Scope is what a metric value describes.
type Scope string

// The scopes of metric values. A func-scope value describes a function, a
// method or a closure (its subject is the node id).
const (
	ScopePackage Scope = "package"
	ScopeType    Scope = "type"
	ScopeFunc    Scope = "func"
)

// Scopes returns the scopes in display order, a new slice each call (the
// caller may change it).
func Scopes() []Scope { return []Scope{ScopePackage, ScopeType, ScopeFunc} }

// Method identifies the algorithm that computed a value and its version;
// a change that can change any value bumps the version.
type Method struct {
	ID      string
	Version int
}

// String renders "id@vN", the form stored with every value.
func (m Method) String() string { return m.ID + "@v" + strconv.Itoa(m.Version) }

// Descriptor is one metric: what it is, how it is computed and where its
// definition comes from. Adding a metric is adding one Descriptor to
// Registry, with its test.
type Descriptor struct {
	// Name is the metric's name as the CLI shows it (lower case, no spaces).
	Name string
	// Title is a short human name ("Afferent coupling (Ca)").
	Title string
	// Doc is the definition, in full sentences.
	Doc string
	// Kind is the kind of the metric's computable values (Measured or
	// Proxy); a value that cannot be computed is Unavailable regardless.
	Kind Kind
	// Method is the algorithm and its version.
	Method Method
	// Scope is what each value describes.
	Scope Scope
	// Integer says that every computable value is a whole number (a count
	// or a complexity), to be shown without decimals; the other metrics are
	// ratios or centralities, shown with a fixed number of decimals however
	// whole a particular value happens to be.
	Integer bool
	// Source is the published definition (paper, specification).
	Source string
	// Choices are the decisions this implementation makes where the source
	// leaves room, stated so that a reader can check them.
	Choices []string
	// Limits are the known limits of the values.
	Limits []string
	// Coverage says what a value's coverage is the fraction of: which of
	// its inputs must load without errors for it to be 1.
	Coverage string
	// Compute returns the metric's values for every subject of its scope
	// that it applies to, Unavailable ones included. It must not keep in.
	Compute func(ctx context.Context, in *Input) ([]Value, error)
}

// Value is one metric value with its provenance.
type Value struct {
	// Metric is the descriptor's Name.
	Metric string `json:"metric"`
	// Subject is the node id the value describes (pkg:..., type:...,
	// func:..., method:..., or a closure id).
	Subject string `json:"subject"`
	// Scope is the descriptor's Scope.
	Scope Scope `json:"scope"`
	// Value is nil exactly when Kind is Unavailable.
	Value *float64 `json:"value"`
	// Kind is Measured, Proxy or Unavailable.
	Kind Kind `json:"kind"`
	// Method is Descriptor.Method.String().
	Method string `json:"method"`
	// Reason says why a value is unavailable, or flags a value that needs
	// care (e.g. LCOM4 of a type whose methods touch no state); "" otherwise.
	Reason string `json:"reason,omitempty"`
	// Detail records how the value was obtained where the method leaves a
	// choice: which graph, whether sources were sampled.
	Detail string `json:"detail,omitempty"`
	// Coverage is the fraction (0..1) of the value's inputs that were
	// loaded without errors, 1 when they all were, whatever the value's
	// kind: an unavailable value whose inputs are complete (abstractness
	// of a package without named types) has coverage 1, one whose inputs
	// did not load has less (see the package doc and
	// Descriptor.Coverage).
	Coverage float64 `json:"coverage"`
	// SnapshotID is the graph snapshot the value was computed from.
	SnapshotID string `json:"snapshot_id"`
	// BuildContext is the snapshot's build context ("GOOS=linux
	// GOARCH=amd64 CGO_ENABLED=1 tags="), which decides which files exist.
	BuildContext string `json:"build_context"`
	// Origin is the subject's node origin (production, test, generated,
	// example, synthesized), so that generated code is reported apart.
	Origin string `json:"origin"`
	// Variant is the package variant of the subject (base, test, xtest,
	// test_dependency).
	Variant string `json:"variant"`
}

// Registry returns every metric, in display order. Each call returns new
// descriptors; callers may not share them across goroutines while mutating.
func Registry() []*Descriptor {
	return []*Descriptor{
		afferentCoupling(), efferentCoupling(), instability(), abstractness(), distance(),
		betweennessImports(),
		lcom4(), nFields(), nUnusedFields(),
		cyclomatic(), cyclomaticFolded(), cognitive(),
		fanIn(), fanOut(), dynamicCalls(), callSCC(), betweennessCalls(),
	}
}

// Lookup returns the descriptor named name.
func Lookup(name string) (*Descriptor, bool) {
	for _, d := range Registry() {
		if d.Name == name {
			return d, true
		}
	}
	return nil, false
}

// Names returns the metric names of scope (all scopes when scope is "").
func Names(scope Scope) []string {
	var out []string
	for _, d := range Registry() {
		if scope == "" || d.Scope == scope {
			out = append(out, d.Name)
		}
	}
	return out
}

// RegistryID identifies the registry's methods and versions: a SHA-256 hex
// prefix (16 chars) over every name and method, so that a database written
// by another set of metrics is not reused (indexer.Options.EnrichID).
func RegistryID() string {
	var b strings.Builder
	for _, d := range Registry() {
		fmt.Fprintf(&b, "%s=%s;", d.Name, d.Method)
	}
	sum := sha256.Sum256([]byte(b.String()))
	return "metrics-" + hex.EncodeToString(sum[:8])
}

// measured builds a computable value of d.
func (d *Descriptor) measured(in *Input, subject string, v float64) Value {
	return Value{
		Metric: d.Name, Subject: subject, Scope: d.Scope, Value: &v, Kind: d.Kind, Method: d.Method.String(),
		Coverage: 1, SnapshotID: in.Snapshot.ID, BuildContext: in.BuildContext,
		Origin: in.origin(subject), Variant: in.variant(subject),
	}
}

// unavailable builds a value of d that could not be computed; coverage is
// the fraction of its inputs that loaded, as for a computed value (1 when
// nothing was missing and the metric has no value for the subject).
func (d *Descriptor) unavailable(in *Input, subject, reason string, coverage float64) Value {
	return Value{
		Metric: d.Name, Subject: subject, Scope: d.Scope, Kind: Unavailable, Method: d.Method.String(),
		Reason: reason, Coverage: coverage, SnapshotID: in.Snapshot.ID, BuildContext: in.BuildContext,
		Origin: in.origin(subject), Variant: in.variant(subject),
	}
}

package replay

import (
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
)

// Two runs compared against each other must have run the same task; two repeats of one case are
// the same case (the repeat index, like the invocation, is identity), and a run recorded before
// schema v7, which names no task, is compared by its manifest digest alone.
func TestSameEnvelopeComparesTaskNotRepeat(t *testing.T) {
	base := evidence.Envelope{Tenant: "t", ManifestDigest: strings.Repeat("a", 64), Mode: "live", Provider: "ref-a",
		Model: "ref-model-a", Formation: "pipeline", TaskProfile: "standard", Language: "go", Case: "pipeline", Task: "double", Repeat: 1}
	run := func(id string, mut func(*evidence.Envelope)) evidence.RunSummary {
		e := base
		mut(&e)
		return evidence.RunSummary{RunID: id, Envelope: e}
	}
	a := run("a", func(*evidence.Envelope) {})
	if d := sameEnvelope(a, run("b", func(e *evidence.Envelope) { e.Repeat = 2 })); d != nil {
		t.Fatalf("two repeats of one case refused: %s", d.reason)
	}
	if d := sameEnvelope(a, run("c", func(e *evidence.Envelope) { e.Task = "" })); d != nil {
		t.Fatalf("a run without a recorded task refused: %s", d.reason)
	}
	if d := sameEnvelope(a, run("d", func(e *evidence.Envelope) { e.Task = "sort" })); d == nil || d.verdict != Refused || !strings.Contains(d.reason, "task double and sort") {
		t.Fatalf("runs of two tasks compared: %+v", d)
	}
	if d := sameEnvelope(a, run("e", func(e *evidence.Envelope) { e.Model = "ref-model-b" })); d == nil || !strings.Contains(d.reason, "model") {
		t.Fatalf("runs of two models compared: %+v", d)
	}
}

package harness

import (
	"slices"
	"testing"

	"github.com/assay-audit/assay/evidence"
)

// The one-line summary names each failure apart: two rows of one store table are two findings,
// each with its row, never one text repeated; a run's failure keeps its first bad event.
func TestFailuresNameEachFindingApart(t *testing.T) {
	r := VerifyReport{Results: []evidence.RunVerification{
		{Table: "writers", Row: "writer_id=1", Status: "tampered"},
		{Table: "writers", Row: "writer_id=2", Status: "tampered"},
		{RunID: "run-a", Status: "tampered", FirstBadSeq: 7},
		{RunID: "run-b", Status: "ok"},
	}}
	want := []string{"store writers writer_id=1 tampered", "store writers writer_id=2 tampered", "run-a tampered at seq 7"}
	if got := r.Failures(); !slices.Equal(got, want) {
		t.Fatalf("Failures() = %q, want %q", got, want)
	}
}

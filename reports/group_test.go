package reports

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
)

// Grouping counts every repeat as its own case, keys repeat indexes numerically, says "not a
// repeat" and "not recorded" for runs without one, and renders in md and json; without GroupBy the
// report has no group section.
func TestGroupCasesByAxis(t *testing.T) {
	mk := func(id, provider, model, task string, repeat int, verdict string) Case {
		return Case{RunID: id, Name: "sequential", Provider: provider, Model: model, Task: task, Repeat: repeat, Verdict: verdict,
			Language: "go", Profile: "standard", Status: "finalized"}
	}
	cases := []Case{
		mk("r1", "ref-a", "m-a", "double", 1, "accepted"), mk("r2", "ref-a", "m-a", "double", 2, "rejected"),
		mk("r3", "ref-b", "m-b", "double", 10, "accepted"), mk("r4", "ref-b", "m-b", "", 0, "accepted"),
	}
	repeat, _ := LookupGroupAxis("repeat")
	got := groupCases(repeat, cases)
	var keys []string
	for _, g := range got {
		keys = append(keys, g.Key)
	}
	if strings.Join(keys, ",") != "1,2,10,"+NotARepeat {
		t.Fatalf("repeat keys %v, want numeric order then %q", keys, NotARepeat)
	}
	task, _ := LookupGroupAxis("task")
	if g := groupCases(task, cases); len(g) != 2 || g[0].Key != "double" || g[0].Totals.Cases != 3 || g[1].Key != NotRecorded {
		t.Fatalf("task groups %+v", g)
	}
	provider, _ := LookupGroupAxis("provider")
	g := groupCases(provider, cases)
	if len(g) != 2 || g[0].Totals.Cases != 2 || g[0].Totals.ByVerdict["accepted"] != 1 || g[0].Totals.ByVerdict["rejected"] != 1 ||
		strings.Join(g[0].RunIDs, ",") != "r1,r2" {
		t.Fatalf("provider groups %+v: the rejected repeat must count on its own", g)
	}
	rep := Report{SchemaVersion: ReportSchemaVersion, Invocations: []Invocation{{ID: "inv-1", Cases: cases, Totals: totalsOf(cases)}},
		Totals: totalsOf(cases), GroupBy: "provider", Groups: g, StoreFindings: []string{}}
	var md, js bytes.Buffer
	if err := Markdown(&md, rep); err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"## Cases by provider", "| ref-a | 2 | 1 | 1 |", "| ref-b | 2 | 2 | 0 |", "| ref-b | `m-b` | #10 |", "repeat #2", "task not recorded, repeat —"} {
		if !strings.Contains(md.String(), want) {
			t.Fatalf("markdown lacks %q:\n%s", want, md.String())
		}
	}
	if err := JSON(&js, rep); err != nil {
		t.Fatal(err)
	}
	var back struct {
		GroupBy string  `json:"group_by"`
		Groups  []Group `json:"groups"`
	}
	if err := json.Unmarshal(js.Bytes(), &back); err != nil || back.GroupBy != "provider" || len(back.Groups) != 2 || back.Groups[1].Totals.Cases != 2 {
		t.Fatalf("json groups %+v %v", back, err)
	}
	rep.GroupBy, rep.Groups = "", []Group{}
	md.Reset()
	_ = Markdown(&md, rep)
	if strings.Contains(md.String(), "## Cases by") {
		t.Fatal("a report without GroupBy has a group section")
	}
	if _, ok := LookupGroupAxis("color"); ok {
		t.Fatal("an unknown axis was found")
	}
}

// A run of the embedded reference provider under a matrix file's name and model id is still a
// reference run (never presented as a model's results); a replay's cassette and a provider with a
// base URL are not.
func TestIsReferenceUnderAMatrixName(t *testing.T) {
	for _, tc := range []struct {
		e    evidence.Envelope
		want bool
	}{
		{evidence.Envelope{Provider: "reference", Model: "assay-reference-1"}, true},
		{evidence.Envelope{Provider: "ref-a", Model: "ref-model-a"}, true},
		{evidence.Envelope{Provider: "openai", BaseURL: "https://api.openai.com/v1", Model: "gpt-4o-mini"}, false},
		{evidence.Envelope{Provider: replayProvider, Model: "gpt-4o-mini"}, false},
		// usage reconcile --into: an external system observed through the gateway, no base URL.
		{evidence.Envelope{Provider: "external", Mode: evidence.ModeObserve, Case: "usage_claims"}, false},
	} {
		if got := isReference(tc.e); got != tc.want {
			t.Errorf("isReference(%+v) = %v, want %v", tc.e, got, tc.want)
		}
	}
}

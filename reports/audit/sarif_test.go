package audit_test

import (
	"bytes"
	"encoding/json"
	"os"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/assay-audit/assay/reports/audit"
	"github.com/assay-audit/assay/reports/audit/audittest"
)

// validateSARIF validates doc against the official SARIF 2.1.0 schemas kept in testdata (see
// testdata/README.md): the OASIS errata01 schema (draft-04) and the draft-07 one of the spec's
// repository.
func validateSARIF(t *testing.T, doc []byte) {
	t.Helper()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		t.Fatalf("SARIF output is not JSON: %v", err)
	}
	for _, file := range []string{"testdata/sarif-schema-2.1.0.json", "testdata/sarif-schema-2.1.0-draft07.json"} {
		f, err := os.Open(file)
		if err != nil {
			t.Fatal(err)
		}
		schemaDoc, err := jsonschema.UnmarshalJSON(f)
		f.Close()
		if err != nil {
			t.Fatal(err)
		}
		c := jsonschema.NewCompiler()
		if err := c.AddResource("file:///"+file, schemaDoc); err != nil {
			t.Fatal(err)
		}
		sch, err := c.Compile("file:///" + file)
		if err != nil {
			t.Fatalf("compile %s: %v", file, err)
		}
		if err := sch.Validate(inst); err != nil {
			t.Fatalf("SARIF output does not validate against %s: %v", file, err)
		}
	}
}

// The schema rejects what is not SARIF: the validation above can fail.
func TestSARIFSchemaRejectsInvalidLogs(t *testing.T) {
	bad := []byte(`{"version":"2.1.0","runs":[{"tool":{"driver":{}},"results":[{"message":{"text":"x"},"level":"fatal"}]}]}`)
	inst, _ := jsonschema.UnmarshalJSON(bytes.NewReader(bad))
	f, err := os.Open("testdata/sarif-schema-2.1.0.json")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	doc, _ := jsonschema.UnmarshalJSON(f)
	c := jsonschema.NewCompiler()
	if err := c.AddResource("file:///s.json", doc); err != nil {
		t.Fatal(err)
	}
	sch, err := c.Compile("file:///s.json")
	if err != nil {
		t.Fatal(err)
	}
	if sch.Validate(inst) == nil {
		t.Fatal("a driver without a name and a level 'fatal' validated")
	}
}

type sarifLog struct {
	Version string `json:"version"`
	Runs    []struct {
		Tool struct {
			Driver struct {
				Name    string `json:"name"`
				Version string `json:"version"`
				Rules   []struct {
					ID                   string `json:"id"`
					Name                 string `json:"name"`
					DefaultConfiguration struct {
						Level string `json:"level"`
					} `json:"defaultConfiguration"`
					Properties map[string]any `json:"properties"`
				} `json:"rules"`
			} `json:"driver"`
		} `json:"tool"`
		Invocations []struct {
			Notifications []struct {
				Message struct{ Text string } `json:"message"`
			} `json:"toolExecutionNotifications"`
		} `json:"invocations"`
		Results []struct {
			RuleID    string `json:"ruleId"`
			Level     string `json:"level"`
			Locations []struct {
				Physical struct {
					Artifact struct{ URI string } `json:"artifactLocation"`
					Region   struct {
						StartLine int `json:"startLine"`
					} `json:"region"`
				} `json:"physicalLocation"`
				Logical []struct {
					Name string `json:"name"`
				} `json:"logicalLocations"`
			} `json:"locations"`
			Properties map[string]any `json:"properties"`
		} `json:"results"`
	} `json:"runs"`
}

// A log with evidence findings, not-assessable rules and metric findings validates against the
// SARIF 2.1.0 schema, and carries every rule, each finding located at its run or its code.
func TestSARIFValidatesAndLocatesFindings(t *testing.T) {
	_, res := hazard(t, audittest.First(t, "R10"))
	res.Graph = "graph.db"
	res.Thresholds = []audit.Threshold{{Metric: "cognitive", Op: ">", Value: 3, Compared: 4}}
	res.Exceeded = []audit.MetricFinding{{Threshold: "cognitive>3", Metric: "cognitive", Subject: "func:example.com/mx/cx.Logic", Scope: "func",
		Value: 7, File: "cx/cx.go", StartLine: 36, EndLine: 44, Kind: "measured", Method: "cognitive@v1", Coverage: 1, Origin: "production", Variant: "base"}}
	doc, err := audit.SARIF(res, audit.SARIFOptions{ToolVersion: "0.1.0-test"})
	if err != nil {
		t.Fatal(err)
	}
	validateSARIF(t, doc)
	if bytes.Contains(doc, []byte(`\u003e`)) || !bytes.Contains(doc, []byte("cognitive>3")) {
		t.Fatal("SARIF escapes > as \\u003e")
	}
	var log sarifLog
	if err := json.Unmarshal(doc, &log); err != nil {
		t.Fatal(err)
	}
	run := log.Runs[0]
	if log.Version != "2.1.0" || run.Tool.Driver.Name != "assay" || run.Tool.Driver.Version != "0.1.0-test" || len(run.Tool.Driver.Rules) != 15 {
		t.Fatalf("driver %+v", run.Tool.Driver)
	}
	for _, r := range run.Tool.Driver.Rules {
		want := "error"
		if r.ID == "R06" || r.ID == "R13" {
			want = "warning"
		}
		if r.DefaultConfiguration.Level != want || r.Name == "" {
			t.Fatalf("rule %s: level %q name %q", r.ID, r.DefaultConfiguration.Level, r.Name)
		}
	}
	var evidenceResults, metricResults int
	for _, r := range run.Results {
		switch {
		case r.RuleID == "R10":
			evidenceResults++
			if r.Level != "error" || r.Locations[0].Logical[0].Name != "r1" || !strings.HasSuffix(r.Locations[0].Physical.Artifact.URI, "evidence.duckdb") {
				t.Fatalf("evidence result %+v", r)
			}
		case r.RuleID == "metric/cognitive":
			metricResults++
			if r.Locations[0].Physical.Artifact.URI != "cx/cx.go" || r.Locations[0].Physical.Region.StartLine != 36 || r.Properties["kind"] != "measured" {
				t.Fatalf("metric result %+v", r)
			}
		default:
			t.Fatalf("unexpected result for %s", r.RuleID)
		}
	}
	if evidenceResults != 1 || metricResults != 1 {
		t.Fatalf("%d evidence results, %d metric results", evidenceResults, metricResults)
	}
	notes := ""
	for _, n := range run.Invocations[0].Notifications {
		notes += n.Message.Text + "\n"
	}
	for _, id := range []string{"R13", "R14"} {
		if !strings.Contains(notes, id+" not assessable") {
			t.Fatalf("notifications do not say %s is not assessable:\n%s", id, notes)
		}
	}
}

// Text survives the log unchanged: <, > and & are written as themselves, and a literal backslash
// before "u003e" stays a backslash.
func TestSARIFKeepsTextVerbatim(t *testing.T) {
	msg := `literal \u003e, <tag> & "quoted" \\u0026`
	res := audit.Result{SchemaVersion: audit.SchemaVersion, Store: "out/evidence.duckdb", Rules: []audit.RuleResult{{ID: "R01", Title: "t", Severity: audit.Critical,
		Status: audit.StatusFinding, Findings: []audit.Finding{{Rule: "R01", Severity: audit.Critical, RunID: "r1", Message: msg}}}}}
	doc, err := audit.SARIF(res, audit.SARIFOptions{ToolVersion: "x"})
	if err != nil {
		t.Fatal(err)
	}
	validateSARIF(t, doc)
	var log struct {
		Runs []struct {
			Results []struct {
				Message struct{ Text string } `json:"message"`
			} `json:"results"`
		} `json:"runs"`
	}
	if err := json.Unmarshal(doc, &log); err != nil {
		t.Fatal(err)
	}
	if got := log.Runs[0].Results[0].Message.Text; got != msg {
		t.Fatalf("message %q, want %q", got, msg)
	}
	if !bytes.Contains(doc, []byte("<tag> &")) {
		t.Fatal("HTML characters escaped")
	}
}

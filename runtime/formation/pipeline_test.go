package formation

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

func TestPipelinePassesEachOutputToTheNextStage(t *testing.T) {
	e, sink, _ := setup(t)
	res := mustRun(t, e, build(t, "pipeline", writer("a"), writer("b"), writer("c")), Options{})
	if !res.Success || len(res.Members) != 3 || res.Metadata["stages_run"] != "3" {
		t.Fatalf("result %+v", res)
	}
	var req map[string]any
	if err := json.Unmarshal(sink.artifacts["provider/run-test-c/0/request.json"], &req); err != nil {
		t.Fatal(err)
	}
	msgs, _ := json.Marshal(req["messages"])
	if !strings.Contains(string(msgs), "the output of stage 2 (b)") || strings.Contains(string(msgs), "stage 1 (a)") {
		t.Fatalf("stage c's input is not exactly stage b's output: %s", msgs)
	}
	if res.FinalOutput != res.Members[2].Output {
		t.Fatalf("final output %q is not the last stage's", res.FinalOutput)
	}
}

func TestPipelineStopsAtAFailedStage(t *testing.T) {
	cases := []struct {
		name  string
		fault reference.Fault
		want  string
	}{
		{"provider error", reference.Fault{Member: "b", Turn: -1, Kind: reference.FaultHTTP500}, "HTTP 500"},
		{"prose around the completion", replace("b", 1, `Done! {"status":"done","files":["double.go"]}`), "malformed structured reply"},
		{"malformed completion JSON", reference.Fault{Member: "b", Turn: 1, Kind: reference.FaultMalformedJSON}, "malformed structured reply"},
		{"extra key", replace("b", 1, `{"status":"done","files":[],"confidence":1}`), "unknown field"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			e, sink, _ := setup(t, c.fault)
			res := mustRun(t, e, build(t, "pipeline", writer("a"), writer("b"), writer("c")), Options{})
			m := byID(res)
			if res.Success || len(res.Members) != 2 || !m["a"].Success || m["b"].Success || !strings.Contains(m["b"].Error, c.want) {
				t.Fatalf("result %+v", res)
			}
			if _, ran := m["c"]; ran || len(sink.memberEvents("c")) != 0 {
				t.Fatal("stage c ran after stage b failed")
			}
			if res.Metadata["stopped_at"] != "b" || !strings.Contains(res.FinalOutput, "failed members:\n- b: ") {
				t.Fatalf("metadata %v output %q", res.Metadata, res.FinalOutput)
			}
		})
	}
}

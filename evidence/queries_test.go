package evidence

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// docQuery is one query of docs/queries.md.
type docQuery struct {
	title, sql string
}

func readDocQueries(t *testing.T) []docQuery {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "docs", "queries.md"))
	if err != nil {
		t.Fatal(err)
	}
	re := regexp.MustCompile("(?s)\n## ([^\n]+)\n.*?```sql\n(.*?)```")
	var out []docQuery
	for _, m := range re.FindAllStringSubmatch(string(data), -1) {
		out = append(out, docQuery{title: m[1], sql: strings.TrimSuffix(strings.TrimSpace(m[2]), ";")})
	}
	return out
}

// queryFixture builds a store holding each situation the documented
// queries look for, and returns its path.
func queryFixture(t *testing.T) string {
	t.Helper()
	ctx := context.Background()
	path := storePath(t)
	s := mustOpen(t, path, OpenOptions{Command: "fixture"})
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	env := func(formation string) Envelope {
		e := testEnvelope(ModeLive)
		e.Formation = formation
		return e
	}
	exchange := func(run, member string, seq int, usage string) {
		session := run + "-" + member
		req, err := s.PutArtifact(ctx, run, fmt.Sprintf("provider/%s/%d/request.json", session, seq), "application/json",
			[]byte(`{"model":"m","messages":[{"role":"user","content":"go"}]}`))
		must(err)
		p := fmt.Sprintf(`{"seq":%d,"status":200,"request_sha256":%q,"request_artifact":%q,"response_sha256":"","usage":%s,"latency_ms":12.5}`, seq, req, req, usage)
		_, err = s.AppendEvent(ctx, run, Event{Type: "provider_exchange", MemberID: member, SessionID: session, Payload: json.RawMessage(p)})
		must(err)
	}
	usage := func(run, member string, wire, store, gateway *int64, gatewayFactor int64) {
		session := run + "-" + member
		mk := func(src string, total *int64) UsageCall {
			c := UsageCall{CallID: session + "/0", Source: src, SessionID: session, MemberID: member, Messages: i64(1)}
			if total != nil {
				c.PromptTokens, c.CompletionTokens, c.TotalTokens = i64(*total-2), i64(2), total
			}
			return c
		}
		calls := []UsageCall{mk(SourceWire, wire), mk(SourceStore, store)}
		row := UsageRow{MemberID: member, SessionID: session, Source: SourceGateway, State: UsageUnknown, Requests: 1}
		if gateway != nil {
			row.State, row.PromptTokens, row.CompletionTokens, row.TotalTokens = UsageReported, i64((*gateway-2)*gatewayFactor), i64(2*gatewayFactor), i64(*gateway*gatewayFactor)
		}
		must(s.RecordUsageCalls(ctx, run, calls...))
		must(s.RecordUsage(ctx, run, row))
		must(s.RecordUsageVerdicts(ctx, run, ReconcileUsageCalls(calls, []UsageRow{row})))
	}
	// run-acc: accepted pipeline run, usage conserved.
	must(s.OpenRun(ctx, "run-acc", env("pipeline"), ""))
	exchange("run-acc", "m1", 0, `{"PromptTokens":8,"CompletionTokens":2,"TotalTokens":10}`)
	usage("run-acc", "m1", i64(10), i64(10), i64(10), 1)
	must(s.RecordCheck(ctx, "run-acc", Check{Name: "tests", Required: true, Status: CheckPassed}))
	_, err := s.Finalize(ctx, "run-acc", Verdict{Verdict: VerdictAccepted})
	must(err)
	// run-rej: parallel run, tests failed, a tool outcome unknown, gateway counted twice, a large artifact.
	must(s.OpenRun(ctx, "run-rej", env("parallel"), ""))
	exchange("run-rej", "m1", 0, `null`)
	_, err = s.AppendEvent(ctx, "run-rej", Event{Type: "tool_result", MemberID: "m1", SessionID: "run-rej-m1",
		Payload: json.RawMessage(`{"call_id":"r0-c1","idempotency_key":"run-rej:m1:r0-c1","tool":"write_file","state":"unknown"}`)})
	must(err)
	_, err = s.PutArtifact(ctx, "run-rej", "provider/run-rej-m1/0/response", "text/event-stream", largeData(InlineLimit+1, 4))
	must(err)
	usage("run-rej", "m1", i64(10), i64(10), i64(10), 2)
	must(s.RecordCheck(ctx, "run-rej", Check{Name: "tests", Required: true, Status: CheckFailed}))
	_, err = s.Finalize(ctx, "run-rej", Verdict{Verdict: VerdictAccepted})
	must(err)
	// run-fix corrects run-rej; its gateway did not report usage.
	must(s.OpenRun(ctx, "run-fix", env("parallel"), "run-rej"))
	usage("run-fix", "m1", i64(10), nil, nil, 1)
	must(s.RecordCheck(ctx, "run-fix", Check{Name: "tests", Required: true, Status: CheckPassed}))
	_, err = s.Finalize(ctx, "run-fix", Verdict{Verdict: VerdictAccepted})
	must(err)
	// run-rep is a replay of run-acc: a run of its own, linked by corrects_run_id, correcting nothing.
	must(s.OpenRun(ctx, "run-rep", env("pipeline"), "run-acc"))
	_, err = s.AppendEvent(ctx, "run-rep", Event{Type: "replay_started", Payload: json.RawMessage(`{"replayed_run_id":"run-acc"}`)})
	must(err)
	_, err = s.AppendEvent(ctx, "run-rep", Event{Type: "replay_verdict", Payload: json.RawMessage(`{"verdict":"exact"}`)})
	must(err)
	must(s.RecordCheck(ctx, "run-rep", Check{Name: "replay", Required: true, Status: CheckPassed}))
	_, err = s.Finalize(ctx, "run-rep", Verdict{Verdict: VerdictAccepted})
	must(err)
	// run-int is left open: the next writer records it interrupted.
	must(s.OpenRun(ctx, "run-int", env("sequential"), ""))
	_, err = s.AppendEvent(ctx, "run-int", Event{Type: "step", Payload: json.RawMessage(`{}`)})
	must(err)
	mustClose(t, s)
	w := mustOpen(t, path, OpenOptions{Command: "recovering writer"})
	must(w.StartSession(ctx))
	mustClose(t, w)
	return path
}

func TestDocumentedQueries(t *testing.T) {
	ctx := context.Background()
	queries := readDocQueries(t)
	if len(queries) != 11 {
		t.Fatalf("docs/queries.md has %d queries, want 11", len(queries))
	}
	ro := mustOpen(t, queryFixture(t), OpenOptions{ReadOnly: true})
	// What each query must find in the fixture: a substring of its rows, rendered.
	want := []string{
		"run-rej parallel live finalized rejected 4 <nil>",
		"run-acc m1 run-acc-m1 conserved reported 10 reported 10 reported 10",
		"parallel tests failed 1",
		"run-rej m1 r0-c1 write_file 2",
		"run-rej rejected run-fix accepted",
		"run-rej run-rej-m1 mismatch",
		"run-int interrupted: writer 1 (pid",
		"run-fix store run-fix-m1/0 run-fix-m1 unknown <nil> <nil>",
		"file artifacts/sha256/",
		"run-rej run-rej-m1 1 1 12.5",
		"run-rep run-acc accepted exact",
	}
	// Queries that list case runs or corrections leave the replay out.
	leaveOutReplay := map[int]bool{1: true, 5: true}
	for i, q := range queries {
		t.Run(fmt.Sprintf("%d %s", i+1, q.title), func(t *testing.T) {
			res, err := ro.Query(ctx, q.sql)
			if err != nil {
				t.Fatalf("query failed: %v\n%s", err, q.sql)
			}
			var lines []string
			for _, row := range res.Rows {
				cells := make([]string, len(row))
				for j, v := range row {
					cells[j] = fmt.Sprint(v)
				}
				lines = append(lines, strings.Join(cells, " "))
			}
			text := strings.Join(lines, "\n")
			if !strings.Contains(text, want[i]) {
				t.Errorf("rows lack %q:\n%s", want[i], text)
			}
			if leaveOutReplay[i+1] && strings.Contains(text, "run-rep") {
				t.Errorf("rows list the replay run run-rep:\n%s", text)
			}
		})
	}
}

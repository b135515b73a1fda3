package harness

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

func sha256Hex(s string) string {
	d := sha256.Sum256([]byte(s))
	return hex.EncodeToString(d[:])
}

// A runtime that lands other bytes than the call asked for (and observes what it landed): the files
// check re-derives the file from the asked content, not from the runtime's observation.
func TestLandedBytesOtherThanTheAskedContentAreRejected(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	lang := caseLanguage(t)
	testFile := deliverables(t, lang)[1]
	hollow := "package double\n\nimport \"testing\"\n\nfunc TestDouble(t *testing.T) {}\n"
	if lang == reference.LanguagePython {
		hollow = "def test_double():\n    pass\n"
	}
	h := &testHooks{
		event: rewrite(func(p *event.ToolResult) {
			if _, ok := p.Files[testFile]; ok && p.MemberID == "exec-1" {
				p.Files[testFile] = sha256Hex(hollow)
			}
		}),
		afterTeam: func(ctx context.Context, db string) {
			files, err := filepath.Glob(filepath.Join(filepath.Dir(db), "cases", "*", "exec-1", testFile))
			if err != nil || len(files) != 1 {
				t.Errorf("member test file: %v %v", files, err)
				return
			}
			if err := os.WriteFile(files[0], []byte(hollow), 0o644); err != nil {
				t.Error(err)
			}
		},
	}
	mustFail(t, runHooked(t, "sequential", nil, h), "files", "exec-1/"+testFile, "asked")
}

// recordedWrites re-derives write_file and edit_file from their arguments, says when it had to take
// the boundary's observation, and names an edit that cannot have succeeded.
func TestRecordedWritesRederiveFromTheAskedArguments(t *testing.T) {
	var recs []tool.Record
	n := 0
	call := func(toolName, args string, state string, files map[string]string) {
		n++
		key := "run:m:c" + string(rune('a'+n))
		recs = append(recs,
			tool.Record{Intent: &tool.Intent{IdempotencyKey: key, MemberID: "m", CallID: key, Tool: toolName, Arguments: json.RawMessage(args)}},
			tool.Record{Outcome: &tool.Outcome{IdempotencyKey: key, MemberID: "m", Tool: toolName, State: state, Files: files}})
	}
	call("write_file", `{"path":"a.go","content":"x := 1\n"}`, tool.StateSucceeded, map[string]string{"a.go": sha256Hex("what the runtime says landed")})
	call("edit_file", `{"path":"./a.go","operations":[{"op":"replace","old":"1","new":"2"},{"op":"append","text":"// end\n"}]}`, tool.StateSucceeded, nil)
	call("write_file", `{"path":"f.go","content":"failed"}`, tool.StateFailed, nil)
	call("shell", `{"command":"echo > b.go"}`, tool.StateSucceeded, map[string]string{"b.go": "b0"})
	call("edit_file", `{"path":"c.go","operations":[{"op":"append","text":"x"}]}`, tool.StateSucceeded, map[string]string{"c.go": "c0"})
	call("write_file", `{"path":"d.go","content":"abc"}`, tool.StateSucceeded, nil)
	call("edit_file", `{"path":"d.go","operations":[{"op":"delete","old":"zzz"}]}`, tool.StateSucceeded, nil)

	sums, observed, conflicts := recordedWrites(recs)
	if got, want := sums["m/a.go"], sha256Hex("x := 2\n// end\n"); got != want {
		t.Errorf("a.go: %s, want the asked write with the edit applied %s", got, want)
	}
	if _, ok := sums["m/f.go"]; ok {
		t.Error("a failed write produced a file")
	}
	if sums["m/b.go"] != "b0" || sums["m/c.go"] != "c0" || strings.Join(observed, ",") != "m/b.go,m/c.go" {
		t.Errorf("observed-only paths: sums b=%q c=%q, observed %v", sums["m/b.go"], sums["m/c.go"], observed)
	}
	if sums["m/d.go"] != "" || len(conflicts) != 1 || !strings.Contains(conflicts[0], "m/d.go") {
		t.Errorf("an edit that cannot apply: d.go %q, conflicts %v", sums["m/d.go"], conflicts)
	}
}

// The harness's reading of edit_file's contract agrees with the tool's on what applies and what it
// leaves, so a runtime that edits otherwise is contradicted and a correct one is not.
func TestEditTextAgreesWithTheToolContract(t *testing.T) {
	base := "func f() int {\n\treturn 1\n}\n// 1 1\n"
	for _, ops := range [][]tool.EditOp{
		{{Op: "replace", Old: "return 1", New: "return 2"}},
		{{Op: "replace", Old: "1", New: "3", Count: 3}},
		{{Op: "replace", Old: "1", New: "3"}},
		{{Op: "insert_before", Anchor: "func", Text: "// doc\n"}, {Op: "insert_after", Anchor: "int {", Text: " // body"}},
		{{Op: "delete", Old: "// 1 1\n"}, {Op: "prepend", Text: "package p\n"}, {Op: "append", Text: "//end"}},
		{{Op: "delete", Old: "absent"}},
		{{Op: "insert_after", Anchor: "1", Text: "x"}},
		{{Op: "rename", Old: "f"}},
	} {
		want, werr := tool.ApplyEdits(base, ops)
		got, gerr := editText(base, ops)
		if (werr == nil) != (gerr == nil) || got != want {
			t.Errorf("%+v: harness %q (%v), tool %q (%v)", ops, got, gerr, want, werr)
		}
	}
}

// putEffect commits value under key at the effect service directly, as a runtime that publishes
// without recording an intent would.
func putEffect(t *testing.T, effectsURL, key, name string) {
	body := `{"name":"` + name + `","value":"double/go/STALE"}`
	req, err := http.NewRequest(http.MethodPut, effectsURL+"/effects/"+url.PathEscape(key), strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode/100 != 2 {
		t.Errorf("PUT %s: %s", key, resp.Status)
	}
}

// Effects the service committed that no recorded intent accounts for: under the run's own keys, or
// during the case under a key of no team of the matrix run.
func TestReceiptsNoRecordedIntentAccountsForAreRejected(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	for _, c := range []struct {
		name string
		key  func(run string) string
	}{
		{"under the run's keys", func(run string) string { return run + ":exec-1:r1-call-attempt-2" }},
		{"under a foreign key", func(string) string { return "elsewhere:exec-1:x" }},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			var key string
			h := &testHooks{duringTeam: func(ctx context.Context, env hookEnv) {
				if env.effectsURL == "" {
					t.Error("no effect service")
					return
				}
				key = c.key(env.runID)
				putEffect(t, env.effectsURL, key, "double/exec-1")
			}}
			cr := runHooked(t, "sequential+remote", nil, h)
			mustFail(t, cr, "effects", "no recorded intent of this run accounts for", key)
		})
	}
}

// A request sent under a finished case's session while a later case runs is the later case's stray
// request: the earlier case's window is closed and its checks have run.
func TestAFinishedCasesSessionDoesNotCoverALaterRequest(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	var mu sync.Mutex
	var runs []string
	h := &testHooks{checks: withoutBuilds, duringTeam: func(ctx context.Context, env hookEnv) {
		mu.Lock()
		defer mu.Unlock()
		if len(runs) == 1 {
			postStray(t, env.gatewayURL, runs[0]+"-exec-1")
		}
		runs = append(runs, env.runID)
	}}
	sum := runMatrix(t, Options{Formations: []string{"sequential", "parallel"}, Language: caseLanguage(t), Concurrency: 1, hooks: h})
	if len(sum.Cases) != 2 {
		t.Fatalf("%d cases", len(sum.Cases))
	}
	if ch := checkByName(sum.Cases[0])["sessions"]; ch.Status != statusPassed {
		t.Errorf("the first case, during which nothing stray happened: sessions %s (%s)", ch.Status, ch.Detail)
	}
	mustFail(t, sum.Cases[1], "sessions", "1 request(s) during the case belong to no member session", runs[0]+"-exec-1")
}

// With the embedded reference provider, which echoes every session it receives, a chat response
// without the echo means the session header never reached the provider.
func TestAMissingSessionEchoFromTheReferenceProviderFailsSessions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	h := &testHooks{afterTeam: func(ctx context.Context, db string) {
		conn, err := sql.Open("sqlite3", db)
		if err != nil {
			t.Error(err)
			return
		}
		defer conn.Close()
		res, err := conn.ExecContext(ctx, `UPDATE requests SET echoed_session = '' WHERE id = (SELECT min(id) FROM requests)`)
		if n, _ := res.RowsAffected(); err != nil || n != 1 {
			t.Error(errors.Join(err, errors.New("no record updated")))
		}
	}}
	mustFail(t, runHooked(t, "sequential", nil, h), "sessions", "the reference provider echoed no session")
}

// A runtime whose write_file also leaves a file nobody asked for (or anything placing one in a
// member's directory): every file there must be one the recorded calls produced.
func TestAFileNoRecordedCallProducedIsRejected(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	h := &testHooks{afterTeam: func(ctx context.Context, db string) {
		dirs, err := filepath.Glob(filepath.Join(filepath.Dir(db), "cases", "*", "exec-2"))
		if err != nil || len(dirs) != 1 {
			t.Errorf("member directory: %v %v", dirs, err)
			return
		}
		if err := os.WriteFile(filepath.Join(dirs[0], "notes.txt"), []byte("unasked\n"), 0o644); err != nil {
			t.Error(err)
		}
	}}
	mustFail(t, runHooked(t, "sequential", nil, h), "files", "exec-2/notes.txt (no recorded call produced it)")
}

// A runtime whose account of an exchange differs from its bytes: the finish reason it recorded, or a
// tool result its journal holds that is not what the next request showed the model.
func TestExchangeClaimsAreHeldToTheRawExchanges(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	type variant struct {
		name string
		hook func(runtime.Event) runtime.Event
		want string
	}
	variants := []variant{
		{"finish reason", func(ev runtime.Event) runtime.Event {
			if ev.MemberID != "exec-1" {
				return ev
			}
			return rewrite(func(p *event.ProviderExchange) {
				if p.Seq == 0 {
					p.FinishReason = "stop"
				}
			})(ev)
		}, "the runtime recorded finish_reason \"stop\""},
		{"tool result", rewrite(func(p *event.ToolResult) {
			if p.MemberID == "exec-1" && p.State == tool.StateSucceeded {
				p.Result = "a result the model was never shown"
			}
		}), "the tool journal recorded \"a result the model was never shown\""},
	}
	// The variants are the repeats of one matrix run, each behind its own hooks.
	var hooks []*testHooks
	for _, c := range variants {
		hooks = append(hooks, only(c.hook))
	}
	got := runHookedRepeats(t, "sequential", nil, hooks...)
	for i, c := range variants {
		t.Run(c.name, func(t *testing.T) { mustFail(t, got[i], "members", c.want) })
	}
}

package harness

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"

	_ "github.com/mattn/go-sqlite3"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// These tests stand a defective runtime (or gateway, or a stray client) in front of the checks:
// hooks change what the runtime records or returns, never the store, and the case must be
// rejected by the check that re-derives the contradicted answer, naming it.

// withoutBuilds leaves out the checks that build and run member code (tests, oracle): the cases
// here are about what the checks re-derive from the recorded bytes.
func withoutBuilds(cs []Check) []Check {
	var out []Check
	for _, c := range cs {
		if c.Name != "tests" && c.Name != "oracle" {
			out = append(out, c)
		}
	}
	return out
}

// rewrite returns an event hook applying f to every payload of type T.
func rewrite[T event.Payload](f func(p *T)) func(runtime.Event) runtime.Event {
	return func(ev runtime.Event) runtime.Event {
		var zero T
		if ev.Type != zero.EventType() {
			return ev
		}
		p, err := event.Decode[T](ev.Type, ev.Payload)
		if err != nil {
			panic(err)
		}
		f(&p)
		raw, err := event.Marshal(p)
		if err != nil {
			panic(err)
		}
		ev.Payload = raw
		return ev
	}
}

func chain(hooks ...func(runtime.Event) runtime.Event) func(runtime.Event) runtime.Event {
	return func(ev runtime.Event) runtime.Event {
		for _, h := range hooks {
			ev = h(ev)
		}
		return ev
	}
}

// claimSuccess is a runtime that reports the team and every member successful, whatever happened.
func claimSuccess(more ...func(runtime.Event) runtime.Event) *testHooks {
	return &testHooks{
		event: chain(append([]func(runtime.Event) runtime.Event{rewrite(func(p *event.TeamCompleted) {
			p.Success, p.FailedMembers = true, nil
		})}, more...)...),
		result: func(r *runtime.TeamResult) {
			r.Success = true
			for i := range r.Members {
				r.Members[i].Success = true
			}
		},
	}
}

func only(h func(runtime.Event) runtime.Event) *testHooks { return &testHooks{event: h} }

// runHooked runs one catalog case with faults and hooks, in caseLanguage, and returns it.
func runHooked(t *testing.T, catalog string, faults []reference.Fault, h *testHooks) CaseResult {
	t.Helper()
	if h.checks == nil {
		h.checks = withoutBuilds
	}
	sum := runMatrix(t, Options{Formations: []string{catalog}, Language: caseLanguage(t), ReferenceFaults: faults, hooks: h})
	if len(sum.Cases) != 1 {
		t.Fatalf("%d cases", len(sum.Cases))
	}
	return sum.Cases[0]
}

// runHookedEach runs the catalog cases named by hooks' keys in one matrix run with faults, each case
// behind its own hooks (withoutBuilds's checks where they narrow none), in caseLanguage, and
// returns them by catalog name.
func runHookedEach(t *testing.T, faults []reference.Fault, hooks map[string]*testHooks) map[string]CaseResult {
	t.Helper()
	var names []string
	for name, h := range hooks {
		if h.checks == nil {
			h.checks = withoutBuilds
		}
		names = append(names, name)
	}
	slices.Sort(names)
	sum := runMatrix(t, Options{Formations: names, Language: caseLanguage(t), ReferenceFaults: faults, Concurrency: 2,
		hooks: &testHooks{byCase: hooks}})
	if len(sum.Cases) != len(names) {
		t.Fatalf("%d cases, want %d", len(sum.Cases), len(names))
	}
	out := map[string]CaseResult{}
	for _, c := range sum.Cases {
		out[c.Catalog] = c
	}
	return out
}

// runHookedRepeats runs catalog len(hooks) times in one matrix run (repeats, one at a time, so that
// each case's gateway window holds only its own requests) with faults, repeat i+1 behind hooks[i]
// (withoutBuilds's checks where they narrow none), in caseLanguage, and returns the cases in repeat
// order.
func runHookedRepeats(t *testing.T, catalog string, faults []reference.Fault, hooks ...*testHooks) []CaseResult {
	t.Helper()
	byCase := map[string]*testHooks{}
	for i, h := range hooks {
		if h.checks == nil {
			h.checks = withoutBuilds
		}
		byCase[hookKey(catalog, i+1)] = h
	}
	sum := runMatrix(t, Options{Formations: []string{catalog}, Repeat: len(hooks), Language: caseLanguage(t), ReferenceFaults: faults,
		hooks: &testHooks{byCase: byCase}})
	if len(sum.Cases) != len(hooks) {
		t.Fatalf("%d cases, want %d", len(sum.Cases), len(hooks))
	}
	return sum.Cases
}

// mustFail asserts the case was rejected with check name failed and its detail naming every want.
func mustFail(t *testing.T, c CaseResult, name string, want ...string) {
	t.Helper()
	ch := checkByName(c)[name]
	if c.Verdict.Verdict == "accepted" || ch.Status == statusPassed {
		t.Fatalf("%s: verdict %s, check %s %s (%s); want rejected by %s", c.Catalog, c.Verdict.Verdict, name, ch.Status, ch.Detail, name)
	}
	t.Logf("%s %s: %s", name, ch.Status, ch.Detail)
	for _, w := range want {
		if !strings.Contains(ch.Detail, w) {
			t.Errorf("%s: check %s detail does not name %q:\n%s", c.Catalog, name, w, ch.Detail)
		}
	}
}

func failedCompletion(member string, turn int) reference.Fault {
	return reference.Fault{Member: member, Turn: turn, Kind: reference.FaultReplaceReply, Reply: `{"status":"failed","error":"cannot do it"}`}
}

func TestFormationDecisionsContradictingTheRawRepliesAreRejected(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the matrix once per fault set, every formation once; skipped with -short")
	}
	lang := caseLanguage(t)
	// Both members propose the same files: one group keyed by task, language and deliverables.
	consensusGroup := "{double/" + lang + "/" + strings.Join(deliverables(t, lang), ",") + ": exec-1, exec-2}"
	cases := []struct {
		name, catalog string
		faults        []reference.Fault
		hooks         func() *testHooks
		want          []string
	}{
		{"sequential claims success over a failed member", "sequential", []reference.Fault{failedCompletion("exec-2", 1)},
			func() *testHooks { return claimSuccess() }, []string{"recorded success=true", "raw replies give success=false", "cannot do it"}},
		{"pipeline claims success over a failed stage", "pipeline", []reference.Fault{failedCompletion("exec-1", 1)},
			func() *testHooks {
				return claimSuccess(rewrite(func(p *event.TeamCompleted) { p.Metadata = map[string]string{"stages_run": "2"} }))
			}, []string{"stages_run \"2\", the trace shows 1", "success=true"}},
		{"parallel claims success over a failed member", "parallel", []reference.Fault{failedCompletion("exec-1", 1)},
			func() *testHooks { return claimSuccess() }, []string{"failed members [] (team_completed", "give [exec-1]"}},
		{"hierarchical claims success over a failed worker", "hierarchical", []reference.Fault{failedCompletion("exec-2", 1)},
			func() *testHooks { return claimSuccess() }, []string{"success=true", "success=false"}},
		{"consensus achieved below the threshold", "consensus",
			[]reference.Fault{{Member: "exec-2", Turn: -1, Kind: reference.FaultReplaceReply, Reply: `{"consensus_key":"other","proposal":"another answer"}`}},
			func() *testHooks {
				return claimSuccess(rewrite(func(p *event.ConsensusDecision) {
					d := "agreed"
					p.ConsensusAchieved, p.Decision, p.AgreeingMembers = true, &d, []string{"exec-1", "exec-2"}
				}))
			}, []string{"consensus_achieved=true", "no agreement", "largest group 1 of 2"}},
		{"consensus agreement recorded as none", "consensus", nil,
			func() *testHooks {
				return only(rewrite(func(p *event.ConsensusRound) { p.Agreement, p.Largest = false, 1 }))
			}, []string{"round 1: the runtime recorded", "largest 1 of 2", "agreement true", consensusGroup}},
		{"reflection critic's verdict misread", "reflection", nil,
			func() *testHooks {
				return only(rewrite(func(p *event.CriticVerdict) {
					if p.Iteration == 1 {
						p.Verdict = "satisfied"
					}
				}))
			}, []string{`iteration 1: the runtime recorded verdict "satisfied"`, `raw reply says "needs_work"`}},
		{"router selection not the one that ran", "dynamic_router", nil,
			func() *testHooks {
				return only(rewrite(func(p *event.RouterSelected) { p.SelectedMemberID = "researcher" }))
			}, []string{"recorded researcher selected by domain_role", "gives exec-1"}},
		{"multi-level hierarchy claims success over a failed leaf", "multi_level_hierarchy", []reference.Fault{failedCompletion("exec-2", 1)},
			func() *testHooks { return claimSuccess() }, []string{"give [exec-2]", "success=false"}},
		{"adaptive switches to another formation than the cycle's next", "adaptive",
			[]reference.Fault{{Member: "exec-2", Turn: 1, Kind: reference.FaultReplaceReply, Reply: `{"status":"failed","error":"cannot","quality_score":0}`}},
			func() *testHooks {
				return only(rewrite(func(p *event.FormationSwitched) { p.To = "consensus" }))
			}, []string{"switch 1 sequential -> consensus", "the cycle gives sequential -> hierarchical"}},
		{"group chat ended on a done nobody said", "group_chat", nil,
			func() *testHooks {
				return only(rewrite(func(p *event.MemberSpoke) {
					if p.Sequence == 1 {
						p.Done = true
					}
				}))
			}, []string{"turn 1: the runtime recorded sequence 1 done=true", "raw reply says done=false"}},
		{"debate judge's selection misread", "debate", nil,
			func() *testHooks {
				return only(rewrite(func(p *event.JudgeVerdict) { p.SelectedMemberID = "exec-2" }))
			}, []string{`selecting "exec-2"`, `raw reply selects "exec-1"`}},
		{"handoff to another member than the reply named", "handoff", nil,
			func() *testHooks {
				return only(rewrite(func(p *event.MemberHandoff) { p.Target = "exec-1" }))
			}, []string{"recorded handoffs exec-1 -> exec-1 after turn 1", "give exec-1 -> exec-2 after turn 1"}},
		{"vote won by the minority candidate", "parallel+vote",
			[]reference.Fault{{Member: "exec-3", Turn: 1, Kind: reference.FaultReplaceReply, Reply: `{"vote_key":"minority","answer":"m"}`}},
			func() *testHooks {
				return only(rewrite(func(p *event.EnsembleDecision) {
					p.SelectedMemberID, p.VoteKey, p.Decision = "exec-3", "minority", "m"
				}))
			}, []string{"recorded exec-3 winning", "majority key", "(2 of 3)"}},
		{"vote winner on a tie", "parallel+vote", []reference.Fault{
			{Member: "exec-2", Turn: 1, Kind: reference.FaultReplaceReply, Reply: `{"vote_key":"second","answer":"x"}`},
			{Member: "exec-3", Turn: 1, Kind: reference.FaultReplaceReply, Reply: `{"vote_key":"third","answer":"y"}`}},
			func() *testHooks {
				return claimSuccess(rewrite(func(p *event.EnsembleDecision) {
					p.SelectedMemberID, p.VoteKey, p.Decision, p.Reason = "exec-2", "second", "x", ""
				}))
			}, []string{"recorded exec-2 selected", "no strict majority: the largest vote has 1 of 3"}},
		{"judge's selection misread", "parallel+judge", nil,
			func() *testHooks {
				return only(rewrite(func(p *event.EnsembleDecision) { p.SelectedMemberID = "exec-2" }))
			}, []string{`selecting "exec-2"`, `raw reply selects "exec-1"`}},
		{"synthesizer's answer replaced", "parallel+synthesizer", nil,
			func() *testHooks {
				return &testHooks{event: rewrite(func(p *event.EnsembleDecision) { p.Decision = "forged answer" }),
					result: func(r *runtime.TeamResult) { r.FinalOutput = "forged answer" }}
			}, []string{`deciding "forged answer"`, "raw reply answers"}},
	}
	// The variants that fault the same replies run as the cases of one matrix run, each case
	// behind its own defective runtime (testHooks.byCatalog): a fault names a member's session
	// and turn, which every case of the run has its own of.
	var groups [][]int
	keys := map[string]int{}
	for i, c := range cases {
		k := fmt.Sprint(c.faults)
		g, ok := keys[k]
		if !ok {
			g = len(groups)
			keys[k] = g
			groups = append(groups, nil)
		}
		groups[g] = append(groups[g], i)
	}
	for _, g := range groups {
		var names []string
		for _, i := range g {
			names = append(names, cases[i].catalog)
		}
		t.Run(strings.Join(names, ","), func(t *testing.T) {
			t.Parallel()
			hooks := map[string]*testHooks{}
			for _, i := range g {
				hooks[cases[i].catalog] = cases[i].hooks()
			}
			got := runHookedEach(t, cases[g[0]].faults, hooks)
			for _, i := range g {
				c := cases[i]
				t.Run(c.name, func(t *testing.T) { mustFail(t, got[c.catalog], "formation", c.want...) })
			}
		})
	}
}

// A runtime that keeps other response bytes than it received: the recorded reply says the attempt
// succeeded, so its switch contradicts the record.
func TestAdaptiveSwitchAfterASuccessfulAttemptIsRejected(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	failed := `{"status":"failed","error":"cannot","quality_score":0}`
	files, _ := json.Marshal(deliverables(t, caseLanguage(t)))
	good := `{"status":"done","files":` + string(files) + `,"quality_score":0.9}`
	esc := func(s string) []byte { b, _ := json.Marshal(s); return b[1 : len(b)-1] }
	h := &testHooks{artifact: func(name string, data []byte) []byte {
		if strings.HasSuffix(name, "-exec-2/1/response") {
			return bytes.ReplaceAll(data, esc(failed), esc(good))
		}
		return data
	}}
	c := runHooked(t, "adaptive", []reference.Fault{{Member: "exec-2", Turn: 1, Kind: reference.FaultReplaceReply, Reply: failed}}, h)
	mustFail(t, c, "formation", "switched from sequential after attempt 1", "successful attempt")
}

// A member whose reply broke its contract, called a success by the runtime: the members check reads
// the reply itself.
func TestMemberSuccessClaimedOverABrokenReplyIsRejected(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	h := claimSuccess(rewrite(func(p *event.MemberFailed) {}))
	h.event = chain(h.event, func(ev runtime.Event) runtime.Event {
		if ev.Type != event.TypeMemberFailed {
			return ev
		}
		p, _ := event.Decode[event.MemberFailed](ev.Type, ev.Payload)
		raw, _ := event.Marshal(event.MemberCompleted{MemberTurn: p.MemberTurn})
		ev.Type, ev.Payload = event.TypeMemberCompleted, raw
		return ev
	})
	c := runHooked(t, "sequential", []reference.Fault{{Member: "exec-2", Turn: 1, Kind: reference.FaultReplaceReply, Reply: `Done! All good.`}}, h)
	mustFail(t, c, "members", "exec-2 invocation 1: the runtime recorded success", "breaks the completion contract")
}

// postStray sends a chat request through the gateway under session (none when "").
func postStray(t *testing.T, gatewayURL, session string) {
	body := `{"model":"assay-reference-1","messages":[{"role":"user","content":"hello"}]}`
	req, err := http.NewRequest(http.MethodPost, gatewayURL+"/v1/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Error(err)
		return
	}
	req.Header.Set("Content-Type", "application/json")
	if session != "" {
		req.Header.Set("X-Session-Id", session)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Error(err)
		return
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
}

func TestRequestsOutsideEveryMemberSessionAreAccountedFor(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	// The two are the repeats of one matrix run (one case at a time: each case's window holds only
	// its own stray requests), each behind its own hooks.
	sessions := []string{"", "intruder"}
	var hooks []*testHooks
	for _, session := range sessions {
		hooks = append(hooks, &testHooks{duringTeam: func(ctx context.Context, env hookEnv) {
			postStray(t, env.gatewayURL, session)
			postStray(t, env.gatewayURL, session)
		}})
	}
	got := runHookedRepeats(t, "sequential", nil, hooks...)
	for i, session := range sessions {
		t.Run("session "+strconv.Quote(session), func(t *testing.T) {
			c := got[i]
			name := strconv.Quote(session)
			if session == "" {
				name = "no session id"
			}
			mustFail(t, c, "sessions", "2 request(s) during the case belong to no member session", name+" x2", "tokens")
			mustFail(t, c, "usage", "in no member's account")
		})
	}
}

// modelRewriter is an OpenAI-compatible endpoint in front of the reference provider that renames the
// model in every chat response: a provider answering with another model than asked.
func modelRewriter(t *testing.T, answered string) string {
	t.Helper()
	ref, err := reference.Start(context.Background(), reference.Config{EffectsDB: t.TempDir() + "/effects.db"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ref.Close() })
	up, err := url.Parse(ref.BaseURL())
	if err != nil {
		t.Fatal(err)
	}
	base := up.Path
	up.Path = ""
	proxy := httputil.NewSingleHostReverseProxy(up)
	proxy.ModifyResponse = func(r *http.Response) error {
		if !strings.HasSuffix(r.Request.URL.Path, "/chat/completions") {
			return nil
		}
		body, err := io.ReadAll(r.Body)
		if err != nil {
			return err
		}
		body = bytes.ReplaceAll(body, []byte(`"model":"`+reference.ModelID+`"`), []byte(`"model":"`+answered+`"`))
		r.Body, r.ContentLength = io.NopCloser(bytes.NewReader(body)), int64(len(body))
		r.Header.Set("Content-Length", strconv.Itoa(len(body)))
		return nil
	}
	srv := httptest.NewServer(proxy)
	t.Cleanup(srv.Close)
	return srv.URL + base
}

func TestRoutingChecksTheModelThatAnswered(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	run := func(t *testing.T, answered string) CaseResult {
		sum := runMatrix(t, Options{Formations: []string{"sequential"}, Language: caseLanguage(t), BaseURL: modelRewriter(t, answered), Model: reference.ModelID,
			hooks: &testHooks{checks: withoutBuilds}})
		return sum.Cases[0]
	}
	t.Run("another model", func(t *testing.T) {
		t.Parallel()
		mustFail(t, run(t, "some-other-model"), "routing", `asked for "assay-reference-1", answered by "some-other-model"`, "recorded response names")
	})
	t.Run("a dated snapshot", func(t *testing.T) {
		t.Parallel()
		c := run(t, reference.ModelID+"-2024-07-18")
		if ch := checkByName(c)["routing"]; ch.Status != statusPassed || !strings.Contains(ch.Detail, "a dated snapshot of assay-reference-1") {
			t.Fatalf("routing %s: %s", ch.Status, ch.Detail)
		}
		if c.Verdict.Verdict != "accepted" {
			t.Fatalf("a dated snapshot was not accepted: %v", c.Verdict.Reasons)
		}
		if ch := checkByName(c)["usage"]; !strings.Contains(ch.Detail, "the provider's word") {
			t.Errorf("usage does not say the counts are the provider's word: %s", ch.Detail)
		}
	})
	t.Run("a declared alias", func(t *testing.T) {
		t.Parallel()
		sum := runMatrix(t, Options{Formations: []string{"sequential"}, Language: caseLanguage(t), BaseURL: modelRewriter(t, "other-name"), Model: reference.ModelID,
			ModelAliases: map[string]string{reference.ModelID: "other-name"}, hooks: &testHooks{checks: withoutBuilds}})
		if ch := checkByName(sum.Cases[0])["routing"]; ch.Status != statusPassed || !strings.Contains(ch.Detail, "declared alias") {
			t.Fatalf("routing %s: %s", ch.Status, ch.Detail)
		}
	})
}

// bumpUsage adds one prompt and total token to a JSON chat response's usage.
func bumpUsage(t *testing.T, data []byte) []byte {
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		t.Errorf("response artifact is not JSON: %v", err)
		return data
	}
	u := m["usage"].(map[string]any)
	u["prompt_tokens"] = u["prompt_tokens"].(float64) + 1
	u["total_tokens"] = u["total_tokens"].(float64) + 1
	out, _ := json.Marshal(m)
	return out
}

func TestEachUsageSourceDisagreeingAloneFailsUsage(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	cases := []struct {
		name   string
		faults []reference.Fault
		hooks  func(t *testing.T) *testHooks
		want   []string
	}{
		{"store", nil, func(t *testing.T) *testHooks {
			return only(rewrite(func(p *event.ProviderExchange) {
				if p.Seq == 0 && p.Usage != nil {
					p.Usage.PromptTokens++
					p.Usage.TotalTokens++
				}
			}))
		}, []string{"mismatch", "prompt_tokens: wire="}},
		{"wire", nil, func(t *testing.T) *testHooks {
			return &testHooks{artifact: func(name string, data []byte) []byte {
				if strings.HasSuffix(name, "-exec-1/0/response") {
					return bumpUsage(t, data)
				}
				return data
			}}
		}, []string{"exec-1 mismatch", "prompt_tokens"}},
		{"gateway", nil, func(t *testing.T) *testHooks {
			return gatewayTamper(t, `UPDATE requests SET prompt_tokens = prompt_tokens + 1, total_tokens = total_tokens + 1
				WHERE id = (SELECT min(id) FROM requests WHERE session_id LIKE ?)`)
		}, []string{"mismatch", "gateway="}},
		{"cached tokens the reference never reports", nil, func(t *testing.T) *testHooks {
			return &testHooks{artifact: func(name string, data []byte) []byte {
				if strings.HasSuffix(name, "-exec-1/0/response") {
					return bytes.Replace(data, []byte(`"cached_tokens":0`), []byte(`"cached_tokens":5`), 1)
				}
				return data
			}}
		}, []string{"cached 5, reasoning 0; its documented rule gives"}},
		{"the provider's count", []reference.Fault{{Member: "exec-1", Turn: 0, Kind: reference.FaultMiscountUsage}},
			func(t *testing.T) *testHooks { return &testHooks{} }, []string{"its documented rule gives"}},
	}
	// The variants without faults are the repeats of one matrix run, each behind its own hooks.
	var hooks []*testHooks
	var shared []int
	for i, c := range cases {
		if c.faults == nil {
			hooks = append(hooks, c.hooks(t))
			shared = append(shared, i)
		}
	}
	got := map[int]CaseResult{}
	for j, cr := range runHookedRepeats(t, "sequential", nil, hooks...) {
		got[shared[j]] = cr
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			cr, ok := got[i]
			if !ok {
				t.Parallel()
				cr = runHooked(t, "sequential", c.faults, c.hooks(t))
			}
			mustFail(t, cr, "usage", c.want...)
		})
	}
}

// gatewayTamper is a hook that, when the team returned, runs stmt on the gateway's usage database
// (a defective gateway's records) with one argument: a LIKE pattern matching the case's member
// sessions ("{run_id}-%"), so that it touches only this case's requests.
func gatewayTamper(t *testing.T, stmt string) *testHooks {
	var runID string
	return &testHooks{duringTeam: func(ctx context.Context, env hookEnv) { runID = env.runID },
		afterTeam: func(ctx context.Context, db string) {
			conn, err := sql.Open("sqlite3", db)
			if err != nil {
				t.Error(err)
				return
			}
			defer conn.Close()
			res, err := conn.ExecContext(ctx, stmt, runID+"-%")
			if err != nil {
				t.Error(err)
				return
			}
			if n, _ := res.RowsAffected(); n != 1 {
				t.Errorf("%s changed %d rows of the case's requests, want 1", stmt, n)
			}
		}}
}

// The statuses say what a mode did: a dry run's effects were simulated, an observed run's asks
// were not enforced; neither shows passed.
func TestModeStatusesSayWhatHappened(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	t.Run("dry_run", func(t *testing.T) {
		t.Parallel()
		sum := runMatrix(t, Options{Formations: []string{"sequential"}, Language: caseLanguage(t), Mode: "dry_run", hooks: &testHooks{checks: withoutBuilds}})
		ch := checkByName(sum.Cases[0])["effects"]
		if ch.Status != statusSimulated || !strings.Contains(ch.Detail, "only simulated (dry_run)") {
			t.Fatalf("effects %s: %s", ch.Status, ch.Detail)
		}
	})
	t.Run("observe", func(t *testing.T) {
		t.Parallel()
		dir := t.TempDir()
		policyPath := dir + "/policy.yaml"
		if err := os.WriteFile(policyPath, []byte("version: 1\ndefault: allow\nrules:\n  - id: writes\n    tools: [write_file]\n    decision: ask\n"), 0o644); err != nil {
			t.Fatal(err)
		}
		sum := runMatrix(t, Options{Formations: []string{"sequential"}, Language: caseLanguage(t), Mode: "observe", PolicyFile: policyPath, hooks: &testHooks{checks: withoutBuilds}})
		ch := checkByName(sum.Cases[0])["effects"]
		if ch.Status != statusNotEnforced || !strings.Contains(ch.Detail, "policy ask") {
			t.Fatalf("effects %s: %s", ch.Status, ch.Detail)
		}
		if sum.Cases[0].Verdict.Verdict != "non_certifiable" {
			t.Fatalf("verdict %s", sum.Cases[0].Verdict.Verdict)
		}
	})
}

// A runtime that stores other response bytes than it received, a runtime whose accumulated usage
// is not the sum of its own records, and a gateway that relays a request without recording it.
func TestStoredBytesAccumulationAndUnrecordedRequestsAreCaught(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	variants := []struct {
		name  string
		h     *testHooks
		check string
		want  []string
	}{
		{"stored response not relayed", &testHooks{artifact: func(name string, data []byte) []byte {
			if strings.HasSuffix(name, "-exec-2/1/response") {
				return bytes.Replace(data, []byte(`"finish_reason":"stop"`), []byte(`"finish_reason":"stop" `), 1)
			}
			return data
		}}, "sessions", []string{"exec-2 request 1: the stored response", "is not a response the gateway relayed"}},
		{"accumulation", &testHooks{result: func(r *runtime.TeamResult) { r.Members[0].Usage.TotalTokens *= 2 }},
			"usage", []string{"exec-1: the runtime accumulated 2 response(s)", "its recorded exchanges sum to 2"}},
		{"a relayed request not recorded", gatewayTamper(t, `DELETE FROM requests WHERE id = (SELECT max(id) FROM requests WHERE session_id LIKE ?)`),
			"sessions", []string{"4 request(s) arrived at the gateway while the team ran, 3 were recorded"}},
	}
	// The variants are the repeats of one matrix run, each behind its own hooks.
	var hooks []*testHooks
	for _, v := range variants {
		hooks = append(hooks, v.h)
	}
	got := runHookedRepeats(t, "sequential", nil, hooks...)
	for i, v := range variants {
		t.Run(v.name, func(t *testing.T) { mustFail(t, got[i], v.check, v.want...) })
	}
}

// A runtime that records tool calls the model did not make, or with other arguments than the
// response carried: the files check reads the calls from the recorded responses.
func TestToolCallsNoResponseAskedForAreRejected(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	type variant struct {
		name   string
		change func(p *event.ToolCall)
		want   string
	}
	variants := []variant{
		{"other arguments", func(p *event.ToolCall) {
			if p.MemberID == "exec-1" {
				p.PayloadSHA256 = strings.Repeat("ab", 32)
			}
		}, "the runtime recorded payload abab"},
		{"a call never made", func(p *event.ToolCall) {
			if p.MemberID == "exec-2" {
				p.CallID = "r7-forged"
			}
		}, "exec-2 call r7-forged (write_file): no recorded response asked for it"},
	}
	// The variants are the repeats of one matrix run, each behind its own hooks.
	var hooks []*testHooks
	for _, c := range variants {
		hooks = append(hooks, only(rewrite(c.change)))
	}
	got := runHookedRepeats(t, "sequential", nil, hooks...)
	for i, c := range variants {
		t.Run(c.name, func(t *testing.T) { mustFail(t, got[i], "files", c.want) })
	}
}

// A provider that echoes another session than it was sent: the gateway records the echo, and the
// sessions check names it (whatever the runtime's client made of it).
func TestAWrongSessionEchoFailsSessions(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	c := runHooked(t, "sequential", []reference.Fault{{Member: "exec-1", Turn: 0, Kind: reference.FaultWrongSession}}, &testHooks{})
	mustFail(t, c, "sessions", "the provider echoed session")
}

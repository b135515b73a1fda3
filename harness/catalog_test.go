package harness

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/runtime/formation"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// The registries tie together: every registered formation has a catalog case with an evidence
// rule, every ensemble mode one too, adaptive can re-derive an attempt of every formation its cycle
// may hold, and every check says what it establishes.
func TestRegistriesTieTogether(t *testing.T) {
	cases := map[string]CatalogEntry{}
	for _, e := range Catalog() {
		cases[e.Name] = e
	}
	for _, f := range formation.Registry() {
		e, ok := cases[f.Name]
		if !ok || e.Formation != f.Name || e.Evidence == nil {
			t.Errorf("formation %s has no catalog case with an evidence rule", f.Name)
		}
		if f.Name != "adaptive" && attemptRule(f.Name) == nil {
			t.Errorf("adaptive cannot re-derive an attempt of %s", f.Name)
		}
	}
	for _, mode := range []string{formation.EnsembleVote, formation.EnsembleJudge, formation.EnsembleSynthesizer} {
		if e, ok := cases["parallel+"+mode]; !ok || e.Options().Ensemble.Mode != mode {
			t.Errorf("ensemble mode %s has no catalog case", mode)
		}
	}
	if e, ok := cases["parallel+capacity"]; !ok || e.Options().Capacity.Declared != 2 || len(e.Members) != 3 {
		t.Error("capacity admission has no catalog case of three members and capacity 2")
	}
	if e, ok := cases["parallel+worktrees"]; !ok || !e.Options().Isolation.Enabled || len(e.Members) != 3 {
		t.Error("worktree isolation has no catalog case of three members")
	}
	seen := map[string]bool{}
	for _, c := range Checks() {
		if c.Doc == "" || c.run == nil || seen[c.Name] {
			t.Errorf("check %q: no doc, no run, or a second check of that name", c.Name)
		}
		seen[c.Name] = true
	}
}

func TestCatalogHasOneCasePerFormationModeAndRemoteEffects(t *testing.T) {
	names := CatalogNames()
	want := "sequential,pipeline,parallel,hierarchical,consensus,reflection,dynamic_router,multi_level_hierarchy,adaptive," +
		"group_chat,debate,handoff,parallel+vote,parallel+judge,parallel+synthesizer,sequential+remote,parallel+capacity,parallel+worktrees"
	if strings.Join(names, ",") != want {
		t.Fatalf("catalog %v", names)
	}
	for _, e := range Catalog() {
		if e.Evidence == nil || e.Options == nil || len(e.Members) == 0 {
			t.Fatalf("incomplete entry %s", e.Name)
		}
		impl := 0
		for _, m := range e.Members {
			if m.Implements {
				impl++
			}
		}
		if impl == 0 {
			t.Fatalf("%s has no implementing member: nothing the oracle could check", e.Name)
		}
	}
	o := Options{OutDir: t.TempDir(), Formations: []string{"all"}}
	if err := o.Normalize(); err != nil || len(o.Formations) != len(Catalog()) {
		t.Fatalf("all: %v %v", o.Formations, err)
	}
	o = Options{OutDir: t.TempDir(), Formations: []string{"vote", "judge"}}
	if err := o.Normalize(); err != nil || strings.Join(o.Formations, ",") != "parallel+vote,parallel+judge" {
		t.Fatalf("mode aliases: %v %v", o.Formations, err)
	}
	for _, bad := range []Options{
		{OutDir: t.TempDir(), Formations: []string{"parallel", "parallel"}},
		{OutDir: t.TempDir(), Formations: []string{"swarm"}},
		{OutDir: t.TempDir(), Concurrency: -1},
		{OutDir: t.TempDir(), Profile: "huge"},
	} {
		if err := bad.Normalize(); err == nil {
			t.Fatalf("accepted %+v", bad)
		}
	}
}

// runMatrix runs the matrix on the embedded reference provider.
func runMatrix(t *testing.T, opts Options) Summary {
	t.Helper()
	if opts.OutDir == "" {
		opts.OutDir = t.TempDir()
	}
	sum, err := Run(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	return sum
}

func checkByName(cr CaseResult) map[string]evidence.Check {
	m := map[string]evidence.Check{}
	for _, c := range cr.Checks {
		m[c.Name] = c
	}
	return m
}

func TestFormationContractViolationsRejectTheCase(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	cases := []struct {
		name    string
		catalog string
		faults  []reference.Fault
		// neighbour runs next to the faulted case and must stay accepted (its members are not faulted).
		neighbour string
		// failed checks that must be named in the rejection
		failed []string
	}{
		{"malformed critic verdict", "reflection", []reference.Fault{{Member: "critic", Turn: 1, Kind: reference.FaultMalformedJSON}},
			"sequential", []string{"members", "formation"}},
		{"judge selects a non-debater", "debate", []reference.Fault{{Member: "judge", Turn: 0, Kind: reference.FaultReplaceReply,
			Reply: `{"selected_member_id":"judge","verdict":"me"}`}}, "parallel", []string{"members", "formation"}},
		{"ensemble vote without a strict majority", "parallel+vote", []reference.Fault{
			{Member: "exec-2", Turn: 1, Kind: reference.FaultReplaceReply, Reply: `{"vote_key":"second","answer":"x"}`},
			{Member: "exec-3", Turn: 1, Kind: reference.FaultReplaceReply, Reply: `{"vote_key":"third","answer":"y"}`}}, "", []string{"formation"}},
		{"selected member replies prose", "dynamic_router", []reference.Fault{{Member: "exec-1", Turn: 1, Kind: reference.FaultReplaceReply,
			Reply: `Done!`}}, "", []string{"members"}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := t.TempDir()
			names := []string{c.catalog}
			if c.neighbour != "" {
				names = append(names, c.neighbour)
			}
			// The rejections are by the members and formation checks, and the neighbour's acceptance
			// is the fault staying in its case: neither needs member code built and run (every
			// catalog case is accepted with the tests and oracle checks in the catalog test and
			// cmd/assay's), so they are left out.
			sum := runMatrix(t, Options{OutDir: out, Formations: names, Language: caseLanguage(t), ReferenceFaults: c.faults, Concurrency: 2,
				hooks: &testHooks{checks: withoutBuilds}})
			if len(sum.Cases) != len(names) || sum.Cases[0].Verdict.Verdict != "rejected" {
				t.Fatalf("faulted case not rejected: %d cases, first %s", len(sum.Cases), sum.Cases[0].Verdict.Verdict)
			}
			if len(names) == 2 && sum.Cases[1].Verdict.Verdict != "accepted" {
				t.Fatalf("the neighbour case was not accepted: %v", sum.Cases[1].Verdict.Reasons)
			}
			checks := checkByName(sum.Cases[0])
			reasons := strings.Join(sum.Cases[0].Verdict.Reasons, "\n")
			for _, name := range c.failed {
				if checks[name].Status == statusPassed || !strings.Contains(reasons, name+" ") {
					t.Fatalf("check %s %s; reasons:\n%s", name, checks[name].Status, reasons)
				}
			}
			s, err := evidence.Open(context.Background(), filepath.Join(out, "evidence.duckdb"), evidence.OpenOptions{ReadOnly: true})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			v, err := s.Verify(context.Background(), sum.Cases[0].RunID)
			if err != nil || len(v) != 1 || v[0].Status != "ok" {
				t.Fatalf("the rejected run's trace does not verify: %+v %v", v, err)
			}
		})
	}
}

// The harness keeps its own copy of the contracts' defaults; today they must equal the runtime's
// (so a drift on either side fails here, and a drifted runtime is contradicted by the checks).
func TestContractDefaultsMatchTheDocumentedOnes(t *testing.T) {
	pairs := []struct {
		name           string
		harness, rtime any
	}{
		{"consensus rounds", defaultConsensusRounds, formation.DefaultConsensusRounds},
		{"consensus threshold", defaultConsensusThreshold, formation.DefaultConsensusThreshold},
		{"reflection iterations", defaultReflectionIterations, formation.DefaultReflectionIterations},
		{"max turns", defaultMaxTurns, formation.DefaultMaxTurns},
		{"transcript max chars", defaultTranscriptMaxChars, formation.DefaultTranscriptMaxChars},
		{"debate rounds", defaultDebateRounds, formation.DefaultDebateRounds},
		{"answer limit", defaultMaxAnswerChars, formation.DefaultMaxAnswerChars},
		{"max switches", defaultMaxSwitches, formation.DefaultMaxSwitches},
		{"fanout", defaultFanout, formation.DefaultFanout},
		{"adaptive cycle", strings.Join(defaultAdaptiveCycle(), ","), strings.Join(formation.DefaultAdaptiveCycle(), ",")},
		{"max depth", defaultMaxDepth, formation.DefaultMaxDepth},
	}
	// And as the formation registry documents them (assay formations lists the same).
	registry := func(f, option string) string {
		o, err := formation.Option(f, option)
		if err != nil {
			t.Fatal(err)
		}
		return o.Default
	}
	pairs = append(pairs, []struct {
		name           string
		harness, rtime any
	}{
		{"registry consensus rounds", defaultConsensusRounds, registry("consensus", "consensus_rounds")},
		{"registry consensus threshold", defaultConsensusThreshold, registry("consensus", "consensus_threshold")},
		{"registry reflection iterations", defaultReflectionIterations, registry("reflection", "reflection_max_iterations")},
		{"registry max turns", defaultMaxTurns, registry("group_chat", "conversation_max_turns")},
		{"registry transcript max chars", defaultTranscriptMaxChars, registry("handoff", "transcript_max_chars")},
		{"registry debate rounds", defaultDebateRounds, registry("debate", "debate_rounds")},
		{"registry answer limit", defaultMaxAnswerChars, registry("parallel", "ensemble_max_answer_chars")},
		{"registry max switches", defaultMaxSwitches, registry("adaptive", "max_switches")},
		{"registry min score (error_rate)", defaultMinScoreErrorRate, registry("adaptive", "min_score")},
		{"registry fanout", defaultFanout, registry("multi_level_hierarchy", "fanout")},
		{"registry max depth", defaultMaxDepth, registry("multi_level_hierarchy", "max_depth")},
		{"registry adaptive cycle", strings.Join(defaultAdaptiveCycle(), ","), registry("adaptive", "adaptive_cycle")},
	}...)
	for _, p := range pairs {
		if fmt.Sprint(p.harness) != fmt.Sprint(p.rtime) {
			t.Errorf("%s: the harness holds %v, the runtime %v", p.name, p.harness, p.rtime)
		}
	}
	var rk []string
	for _, r := range defaultRoleKeywords() {
		rk = append(rk, r.role+":"+strings.Join(r.words, ","))
	}
	var want []string
	for _, r := range formation.RoleKeywords() {
		want = append(want, r.Role+":"+strings.Join(r.Words, ","))
	}
	if strings.Join(rk, ";") != strings.Join(want, ";") {
		t.Errorf("role keywords: the harness holds %v, the runtime %v", rk, want)
	}
}

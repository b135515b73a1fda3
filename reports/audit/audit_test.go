package audit_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/testroot"
	"github.com/assay-audit/assay/reports/audit"
	"github.com/assay-audit/assay/reports/audit/audittest"
)

// fixtureRoot holds the stores shared by the tests of this binary; TestMain removes it after them.
var fixtureRoot string

func TestMain(m *testing.M) {
	os.Exit(testroot.Main(m, "audit-test-", &fixtureRoot))
}

// shared is a store written once per test binary and its evaluation over every rule.
type shared struct {
	once sync.Once
	path string
	res  audit.Result
	err  string
}

// sharedStores are the stores written by built, by key.
var sharedStores sync.Map // key -> *shared

// built writes the store build returns under a directory of its own, once per key per test binary,
// evaluates it once, and returns its path and result; callers open it read-only and never change it.
func built(t *testing.T, key string, build func(t testing.TB, dir string) string) (string, audit.Result) {
	t.Helper()
	v, _ := sharedStores.LoadOrStore(key, &shared{})
	s := v.(*shared)
	s.once.Do(func() {
		s.err = "writing or evaluating the store " + key + " failed in " + t.Name()
		dir, err := os.MkdirTemp(fixtureRoot, "store-")
		if err != nil {
			t.Fatal(err)
		}
		s.path = build(t, dir)
		s.res = evaluate(t, s.path)
		s.err = ""
	})
	if s.err != "" {
		t.Fatal(s.err)
	}
	return s.path, s.res
}

// clean returns f's store without its hazard (shared by the fixtures with the same Clean) and its
// evaluation.
func clean(t *testing.T, f audittest.Fixture) (string, audit.Result) {
	t.Helper()
	return built(t, "clean/"+f.Clean.Name, f.Clean.Build)
}

// hazard returns f's store with its hazard and its evaluation. A tampered store is a copy of the
// shared clean one, edited.
func hazard(t *testing.T, f audittest.Fixture) (string, audit.Result) {
	t.Helper()
	return built(t, "hazard/"+f.Rule+"/"+f.Name, func(tb testing.TB, dir string) string {
		if f.Tamper == nil {
			return f.Hazard(tb, dir)
		}
		src, _ := clean(t, f)
		if err := os.CopyFS(dir, os.DirFS(filepath.Dir(src))); err != nil {
			tb.Fatal(err)
		}
		path := filepath.Join(dir, filepath.Base(src))
		f.Tamper(tb, path)
		return path
	})
}

// evaluate opens the store at path read-only and evaluates every rule.
func evaluate(t *testing.T, path string, runs ...string) audit.Result {
	t.Helper()
	s, err := evidence.Open(context.Background(), path, evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := audit.Evaluate(context.Background(), s, audit.Options{Runs: runs})
	if err != nil {
		t.Fatal(err)
	}
	return res
}

// withFindings returns the ids of the rules that found something.
func withFindings(res audit.Result) []string {
	var ids []string
	for _, r := range res.Rules {
		if len(r.Findings) > 0 {
			ids = append(ids, r.ID)
		}
	}
	return ids
}

func rule(res audit.Result, id string) audit.RuleResult {
	for _, r := range res.Rules {
		if r.ID == id {
			return r
		}
	}
	return audit.RuleResult{}
}

// The registry is RISKS.md's register: R01–R14 in order, with RISKS.md's severities (R06 and R13
// high, the others critical).
func TestRegistryIsTheRiskRegister(t *testing.T) {
	var got []string
	for _, r := range audit.Registry() {
		want := audit.Critical
		if r.ID == "R06" || r.ID == "R13" {
			want = audit.High
		}
		if r.Severity != want || r.Title == "" || r.Hazard == "" || r.Doc == "" || r.Procedure == "" || r.Check == nil {
			t.Errorf("%s: incomplete or wrong severity %q: %+v", r.ID, r.Severity, r)
		}
		got = append(got, r.ID)
	}
	want := []string{"R01", "R02", "R03", "R04", "R05", "R06", "R07", "R08", "R09", "R10", "R11", "R12", "R13", "R14"}
	if !slices.Equal(got, want) {
		t.Fatalf("registry %v, want %v", got, want)
	}
	if r, ok := audit.Lookup("r1"); !ok || r.ID != "R01" {
		t.Fatalf("Lookup(r1) = %v, %v", r, ok)
	}
}

// Each fixture's hazard is found by its rule (and only by the rules the hazard necessarily trips),
// and the same store built without the hazard has no finding at all: a rule that cannot see its
// hazard, or that sees one where there is none, fails here.
func TestEachRuleFindsItsFixtureHazard(t *testing.T) {
	for _, f := range audittest.Fixtures() {
		t.Run(f.Rule+"/"+f.Name, func(t *testing.T) {
			t.Parallel() // each fixture is its own store; building one mostly waits on fsync
			_, clean := clean(t, f)
			if ids := withFindings(clean); len(ids) > 0 {
				for _, x := range clean.Findings() {
					t.Log(x.Rule, x.Message)
				}
				t.Fatalf("without the hazard, rules %v found something", ids)
			}
			if len(clean.Rules) != 14 {
				t.Fatalf("%d rules listed, want 14", len(clean.Rules))
			}
			_, res := hazard(t, f)
			r := rule(res, f.Rule)
			if r.Status != audit.StatusFinding || len(r.Findings) == 0 {
				t.Fatalf("%s: status %s, no finding of the hazard", f.Rule, r.Status)
			}
			want := append([]string{f.Rule}, f.Also...)
			slices.Sort(want)
			if got := withFindings(res); !slices.Equal(got, want) {
				for _, x := range res.Findings() {
					t.Log(x.Rule, x.Message)
				}
				t.Fatalf("rules with findings %v, want %v", got, want)
			}
			for _, x := range r.Findings {
				if x.Severity != r.Severity || x.Procedure == "" || len(x.Evidence) == 0 || x.Message == "" {
					t.Fatalf("finding without its severity, procedure or evidence: %+v", x)
				}
			}
			if res.Critical() != (r.Severity == audit.Critical) {
				t.Fatalf("Critical() = %v for a %s finding", res.Critical(), r.Severity)
			}
		})
	}
}

// R13 and R14 cannot be decided by evidence: listed not_assessable with a reason, on any store.
func TestHostRulesAreNeverPassed(t *testing.T) {
	_, res := clean(t, audittest.Fixtures()[0])
	for _, id := range []string{"R13", "R14"} {
		r := rule(res, id)
		if r.Status != audit.StatusNotAssessable || r.Reason == "" {
			t.Fatalf("%s: %s %q", id, r.Status, r.Reason)
		}
	}
}

// A rule that applies to nothing in the selection is not_assessable naming what was missing, not
// passed; one evaluated over rows that exist is passed with the count.
func TestNothingToEvaluateIsNotAPass(t *testing.T) {
	_, res := built(t, "clean/"+audittest.LiveCase().Name, audittest.LiveCase().Build) // one live case run r1
	for _, id := range []string{"R01", "R05", "R07"} {
		if r := rule(res, id); r.Status != audit.StatusNotAssessable || !strings.Contains(r.Reason, "resumed or replay runs") {
			t.Fatalf("%s on a store without resumes: %s %q", id, r.Status, r.Reason)
		}
	}
	if r := rule(res, "R02"); r.Status != audit.StatusPassed || r.Evaluated != 1 {
		t.Fatalf("R02: %s over %d", r.Status, r.Evaluated)
	}
	if r := rule(res, "R09"); r.Status != audit.StatusPassed || r.Evaluated != 1 {
		t.Fatalf("R09 over one run: %s over %d (it counts runs, not the queries it ran)", r.Status, r.Evaluated)
	}
	// A store with no run: no rule passes, R09 included (it read the chains, over nothing).
	empty := audittest.NewBuilder(t, t.TempDir())
	for _, r := range evaluate(t, empty.Close()).Rules {
		if r.Status == audit.StatusPassed {
			t.Errorf("%s passed on a store with no run: %q", r.ID, r.Reason)
		}
	}
}

// Naming runs narrows the audit to them; naming a run the store lacks is ErrNoRun; an unknown rule
// is ErrUnknownRule.
func TestSelection(t *testing.T) {
	path, _ := hazard(t, audittest.First(t, "R02")) // R02's hazard in r1
	s, err := evidence.Open(context.Background(), path, evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	res, err := audit.Evaluate(context.Background(), s, audit.Options{Runs: []string{"r1"}, Rules: []string{"R02", "r8"}})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Rules) != 2 || res.Rules[0].ID != "R02" || res.Rules[1].ID != "R08" || len(res.Rules[0].Findings) != 1 {
		t.Fatalf("%+v", res.Rules)
	}
	if _, err := audit.Evaluate(context.Background(), s, audit.Options{Runs: []string{"nope"}}); !errorsIs(err, evidence.ErrNoRun) {
		t.Fatalf("unknown run: %v", err)
	}
	if _, err := audit.Evaluate(context.Background(), s, audit.Options{Rules: []string{"R15"}}); !errorsIs(err, audit.ErrUnknownRule) {
		t.Fatalf("unknown rule: %v", err)
	}
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

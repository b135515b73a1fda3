package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/runtime/formation"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// A formation option that is malformed, unknown, out of range, refused by the formation's own
// checks for the case's team, or not re-derived by the checks is refused before anything runs.
func TestFormationOptionsAreRefusedBeforeAnythingRuns(t *testing.T) {
	cases := []struct {
		name, formations string
		settings         []string
		want             string
	}{
		{"not NAME=VALUE", "consensus", []string{"consensus_threshold"}, "is not NAME=VALUE"},
		{"set twice", "consensus", []string{"consensus_rounds=2", "consensus_rounds=3"}, "twice"},
		{"no selected formation has it", "sequential", []string{"consensus_rounds=2"}, "none of the selected formations"},
		{"unknown", "consensus", []string{"quorum=2"}, "none of the selected formations"},
		{"out of range", "consensus", []string{"consensus_threshold=0.5"}, "(0.5,1]"},
		{"capacity on a case whose rule does not re-derive it", "sequential", []string{"max_workers=1"}, "only the plain parallel cases"},
		{"capacity on an ensemble case", "parallel+vote", []string{"capacity_aware=true", "capacity_declared=2"}, "only the plain parallel cases"},
		{"capacity left to the provider during the run", "parallel", []string{"capacity_aware=true"}, "--capacity provider"},
		{"worktrees on a case whose rule does not re-derive them", "sequential", []string{"worktree_isolation=true"}, "none of the selected formations"},
		{"not re-derived: worktree repository", "parallel", []string{"worktree_repo=/tmp/x"}, "the harness makes the repository"},
		{"not re-derived: worktree cleanup", "parallel", []string{"worktree_cleanup=true"}, "leave it nothing to read"},
		{"not re-derived: retries", "parallel", []string{"parallel_member_retries=2"}, "no check re-derives it"},
		{"not re-derived: ensemble mode", "consensus", []string{"ensemble_mode=vote"}, "ensemble cases"},
		{"not re-derived: performance", "adaptive", []string{"adaptive_strategy=performance"}, "wall time"},
		{"the formation's own check", "dynamic_router", []string{"routes=implement:nobody"}, `unknown member "nobody"`},
		{"a tree deeper than max_depth", "multi_level_hierarchy", []string{"max_depth=2"}, "exceeds max_depth 2"},
		{"a tree that misses members", "multi_level_hierarchy", []string{`tree={"member_id":"root"}`}, "multi_level_hierarchy"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			opts := Options{OutDir: out, Formations: strings.Split(c.formations, ","), FormationOptions: c.settings}
			err := opts.Normalize()
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Field != "FormationOptions" || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Normalize: %v, want a FormationOptions refusal naming %q", err, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("the output directory was created: %v", err)
			}
		})
	}
}

// The settings that apply to a case are recorded in its manifest, so its digest binds them; a
// catalog case without settings keeps its digest, and settings of other formations are left out.
func TestFormationOptionsAreBoundByTheManifestDigest(t *testing.T) {
	digest := func(settings ...string) (string, manifest) {
		t.Helper()
		opts := Options{OutDir: t.TempDir(), Formations: []string{"consensus", "reflection"}, FormationOptions: settings}
		if err := opts.Normalize(); err != nil {
			t.Fatal(err)
		}
		e, _ := LookupCase("consensus")
		e, err := e.withFormationOptions(opts.FormationOptions)
		if err != nil {
			t.Fatal(err)
		}
		_, m, env, err := prepareCase(opts, Case{Entry: e, Profile: Profiles()[opts.Profile], Language: opts.Language}, "run-x", false)
		if err != nil {
			t.Fatal(err)
		}
		return env.ManifestDigest, m
	}
	plain, m := digest()
	if m.FormationOptions != nil {
		t.Fatalf("a catalog case records settings %v", m.FormationOptions)
	}
	other, m := digest("reflection_max_iterations=2")
	if other != plain || m.FormationOptions != nil {
		t.Fatalf("another formation's setting changed the consensus case: %v", m.FormationOptions)
	}
	set, m := digest("consensus_threshold=1", "reflection_max_iterations=2")
	if set == plain || len(m.FormationOptions) != 1 || m.FormationOptions[0] != "consensus_threshold=1" {
		t.Fatalf("digest %s (plain %s), recorded %v", set, plain, m.FormationOptions)
	}
	if again, _ := digest("consensus_threshold=0.9"); again == set {
		t.Fatal("two thresholds give one digest")
	}
}

// A runtime that runs with other options than the case records is contradicted: the checks
// re-derive with the recorded option. Reflection: the case says one iteration and the runtime runs
// the default three (the critic's second verdict satisfies it). Adaptive: the case says to start at
// consensus and the runtime starts at the cycle's first. Without the recorded option each rule
// would follow the catalog's options and accept.
func TestARuntimeIgnoringAFormationOptionIsRejected(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs matrix cases; skipped with -short")
	}
	cases := []struct {
		catalog, setting string
		ignore           func(o *formation.Options)
	}{
		{"reflection", "reflection_max_iterations=1", func(o *formation.Options) { o.Reflection.MaxIterations = 0 }},
		{"adaptive", "initial_formation_hint=consensus", func(o *formation.Options) { o.Adaptive.InitialFormation = "" }},
	}
	for _, c := range cases {
		t.Run(c.catalog, func(t *testing.T) {
			sum := runMatrix(t, Options{Formations: []string{c.catalog}, Language: caseLanguage(t), FormationOptions: []string{c.setting},
				hooks: &testHooks{checks: withoutBuilds, options: c.ignore}})
			if len(sum.Cases) != 1 {
				t.Fatalf("%d cases", len(sum.Cases))
			}
			mustFail(t, sum.Cases[0], "formation")
		})
	}
}

// A case run with a formation option the checks follow is accepted when the runtime follows it.
func TestAFormationOptionTheRuntimeFollowsIsAccepted(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a matrix case; skipped with -short")
	}
	sum := runMatrix(t, Options{Formations: []string{"adaptive"}, Language: caseLanguage(t), FormationOptions: []string{"initial_formation_hint=consensus"},
		hooks: &testHooks{checks: withoutBuilds}})
	if len(sum.Cases) != 1 || sum.Cases[0].Verdict.Verdict != "accepted" {
		t.Fatalf("%+v", sum.Cases)
	}
}

// A tree deeper than the recorded max_depth that ran anyway is rejected: the bound must refuse it
// before execution. (The matrix's pre-flight refuses such a setting through the runtime's own
// validation; this is the independent check for a runtime whose validation let it through.)
func TestATreeDeeperThanMaxDepthThatRanIsRejected(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("runs a matrix case; skipped with -short")
	}
	recordedMaxDepth2 := func(cs []Check) []Check {
		cs = withoutBuilds(cs)
		for i := range cs {
			if cs[i].Name == "formation" {
				run := cs[i].run
				cs[i].run = func(ctx context.Context, s *caseState) (string, string, any) {
					base := s.entry.Options
					s.entry.Options = func() formation.Options {
						o := base()
						o.Hierarchy.MaxDepth = 2
						return o
					}
					return run(ctx, s)
				}
			}
		}
		return cs
	}
	c := runHooked(t, "multi_level_hierarchy", nil, &testHooks{checks: recordedMaxDepth2})
	mustFail(t, c, "formation", "the tree of depth 3 ran although max_depth is 2")
}

// --capacity: a number of slots or the provider's declared capacity, on the plain parallel cases
// only; anything else is refused before anything runs, naming the field.
func TestCapacityIsRefusedBeforeAnythingRuns(t *testing.T) {
	for _, c := range []struct {
		name, formations, capacity string
		settings                   []string
		want                       string
	}{
		{"not a number", "parallel+capacity", "two", nil, "neither a number"},
		{"zero slots", "parallel+capacity", "0", nil, "neither a number"},
		{"too many", "parallel+capacity", "1025", nil, "neither a number"},
		{"a case that does not re-derive it", "parallel,sequential", "2", nil, "only the plain parallel cases"},
		{"provider, on a case that does not re-derive it", "consensus", CapacityProvider, nil, "only the plain parallel cases"},
		{"set twice", "parallel", "2", []string{"capacity_declared=3"}, "both set the capacity"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out := filepath.Join(t.TempDir(), "out")
			opts := Options{OutDir: out, Formations: strings.Split(c.formations, ","), Capacity: c.capacity, FormationOptions: c.settings}
			err := opts.Normalize()
			var oe *OptionError
			if !errors.As(err, &oe) || oe.Field != "Capacity" || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("Normalize: %v, want a Capacity refusal naming %q", err, c.want)
			}
			if _, err := os.Stat(out); !os.IsNotExist(err) {
				t.Fatalf("the output directory was created: %v", err)
			}
		})
	}
	// A number becomes the recorded options, once however often Normalize runs.
	opts := Options{OutDir: t.TempDir(), Formations: []string{"parallel", "parallel+capacity"}, Capacity: "3"}
	for range 2 {
		if err := opts.Normalize(); err != nil {
			t.Fatal(err)
		}
	}
	if got := strings.Join(opts.FormationOptions, " "); got != "capacity_aware=true capacity_declared=3" {
		t.Fatalf("FormationOptions %q", got)
	}
}

// --capacity provider reads the provider's declared max_parallel_requests before anything is
// written; a provider that declares none is refused (never unlimited).
func TestCapacityProviderIsTheDeclaredCapacityOrRefused(t *testing.T) {
	opts := Options{OutDir: t.TempDir(), Formations: []string{"parallel+capacity"}, Capacity: CapacityProvider}
	if err := opts.Normalize(); err != nil {
		t.Fatal(err)
	}
	if err := opts.resolveCapacity(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(opts.FormationOptions, " "), fmt.Sprintf("capacity_aware=true capacity_declared=%d", reference.DefaultParallelCapacity); got != want {
		t.Fatalf("FormationOptions %q, want %q", got, want)
	}
	// A provider whose model object declares no capacity.
	ref, err := reference.Start(t.Context(), reference.Config{ParallelCapacity: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer ref.Close()
	out := filepath.Join(t.TempDir(), "out")
	_, err = Run(t.Context(), Options{OutDir: out, BaseURL: ref.BaseURL(), Model: reference.ModelID, Formations: []string{"parallel+capacity"}, Capacity: CapacityProvider})
	var oe *OptionError
	if !errors.As(err, &oe) || oe.Field != "Capacity" || !strings.Contains(err.Error(), "declares no usable capacity") {
		t.Fatalf("Run: %v, want a Capacity refusal", err)
	}
	if _, err := os.Stat(out); !os.IsNotExist(err) {
		t.Fatalf("the output directory was created: %v", err)
	}
}

package harness

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/formation"
	"github.com/assay-audit/assay/runtime/tool"
	"github.com/assay-audit/assay/tasks"
)

// rederivedOptions are the formation options (formation.OptionSpec names) a matrix case may set:
// those every check that depends on them re-derives from the recorded options (rules_*.go,
// formation_evidence.go read the case's options, never the runtime's conclusion). The check, when
// there is one, refuses a value, or a case, the re-derivation cannot follow.
var rederivedOptions = map[string]func(e CatalogEntry, value string) error{
	"consensus_rounds":          nil,
	"consensus_threshold":       nil,
	"reflection_max_iterations": nil,
	"verdict_format":            nil,
	"conversation_max_turns":    nil,
	"transcript_max_chars":      nil,
	"debate_rounds":             nil,
	"ensemble_max_answer_chars": nil,
	"routes":                    nil,
	"fanout":                    nil,
	"max_depth":                 nil,
	"split":                     nil,
	"tree":                      nil,
	"adaptive_cycle":            nil,
	"max_switches":              nil,
	"min_score":                 nil,
	"initial_formation_hint":    nil,
	"adaptive_strategy": func(_ CatalogEntry, v string) error {
		if v == formation.StrategyPerformance {
			return fmt.Errorf("the performance strategy scores wall time, which the recorded replies do not carry, so the adaptive check cannot re-derive its switches")
		}
		return nil
	},
	// Capacity admission is re-derived by the admission rule (rules_admission.go) for plain
	// parallel cases, from the recorded slots and the members' start and end order.
	"capacity_aware":    admissionRederived,
	"capacity_declared": admissionRederived,
	"max_workers":       admissionRederived,
	// Worktree isolation is re-derived by the worktree rule for plain parallel cases; the harness
	// makes the repository in the case directory (worktree_repo is its own) and keeps the
	// worktrees for the check (worktree_cleanup would remove what the check reads).
	"worktree_isolation": admissionRederived,
}

// admissionRederived refuses capacity admission and worktree isolation on a case whose evidence
// rule does not re-derive them: only plain parallel cases (no ensemble mode) have the admission
// and worktree rules.
func admissionRederived(e CatalogEntry, _ string) error {
	if e.Formation != "parallel" || e.Options().Ensemble.Mode != "" {
		return fmt.Errorf("only the plain parallel cases (%s) re-derive admission and worktrees from the recorded events, not %s",
			strings.Join(PlainParallelCases(), ", "), e.Name)
	}
	return nil
}

// PlainParallelCases names the catalog cases of the parallel formation without an ensemble mode, in catalog
// order: the cases whose formation check re-derives capacity admission and worktree isolation.
func PlainParallelCases() []string {
	var out []string
	for _, e := range Catalog() {
		if e.Formation == "parallel" && e.Options().Ensemble.Mode == "" {
			out = append(out, e.Name)
		}
	}
	return out
}

// notRederived says why an option the registry lists cannot be set on a matrix case.
func notRederived(name string) string {
	switch name {
	case "ensemble_mode":
		return "the ensemble mode decides the members' roles: select the catalog's ensemble cases (parallel+vote, parallel+judge, parallel+synthesizer)"
	case "worktree_repo":
		return "the harness makes the repository of an isolated case in its case directory (set worktree_isolation=true, or select parallel+worktrees)"
	case "worktree_cleanup":
		return "the worktree check reads each member's files and git's worktree list after the team; removed worktrees leave it nothing to read"
	}
	return "no check re-derives it from the recorded evidence yet, so a run could be accepted without following it"
}

// formationSetting is one parsed FormationOptions entry.
type formationSetting struct{ name, value string }

func (s formationSetting) String() string { return s.name + "=" + s.value }

// checkFormationOptions parses FormationOptions and refuses, before anything runs: a malformed
// entry, a name twice, a name no selected case's formation has, an option no check re-derives, a
// value out of the option's range, and a setting the formation's own checks (formation.Check)
// refuse for a selected case's team.
func (o *Options) checkFormationOptions() error {
	var settings []formationSetting
	for _, kv := range o.FormationOptions {
		name, value, ok := strings.Cut(kv, "=")
		if !ok || name == "" {
			return optionErr("FormationOptions", "%q is not NAME=VALUE", kv)
		}
		if slices.ContainsFunc(settings, func(s formationSetting) bool { return s.name == name }) {
			return optionErr("FormationOptions", "sets %s twice", name)
		}
		settings = append(settings, formationSetting{name, value})
	}
	for _, s := range settings {
		applies := false
		for _, name := range o.Formations {
			e, _ := LookupCase(name) // Normalize resolved every name
			spec, err := formation.Option(e.Formation, s.name)
			if err != nil {
				continue
			}
			applies = true
			check, ok := rederivedOptions[s.name]
			if !ok {
				return optionErr("FormationOptions", "%s cannot be set on a matrix case: %s", s.name, notRederived(s.name))
			}
			if check != nil {
				if err := check(e, s.value); err != nil {
					return optionErr("FormationOptions", "%s=%s cannot be set on a matrix case: %v", s.name, s.value, err)
				}
			}
			var probe formation.Options
			if err := spec.Set(&probe, s.value); err != nil {
				return optionErr("FormationOptions", "%v", err)
			}
		}
		if !applies {
			return optionErr("FormationOptions", "names %s, an option of none of the selected formations (assay formations lists each formation's options)", s.name)
		}
	}
	for _, name := range o.Formations {
		e, _ := LookupCase(name)
		e, err := e.withFormationOptions(o.FormationOptions)
		if err != nil {
			return optionErr("FormationOptions", "%v", err)
		}
		if len(e.FormationOptions) == 0 {
			continue
		}
		if err := checkEntry(e, o.Profile, o.Language, o.task); err != nil {
			return optionErr("FormationOptions", "case %s: %v", e.Name, err)
		}
	}
	return nil
}

// withFormationOptions returns e with the settings (NAME=VALUE) that name an option of its
// formation applied over its own options, in order; settings naming options its formation does
// not have are left out. FormationOptions records the applied ones: the manifest binds them, and
// every check reads the options through Options, so the checks follow what the run was given.
func (e CatalogEntry) withFormationOptions(settings []string) (CatalogEntry, error) {
	var applied []string
	var specs []formation.OptionSpec
	var values []string
	for _, kv := range settings {
		name, value, _ := strings.Cut(kv, "=")
		spec, err := formation.Option(e.Formation, name)
		if err != nil {
			continue
		}
		check, ok := rederivedOptions[name]
		if !ok {
			return e, fmt.Errorf("%s cannot be set on a matrix case: %s", name, notRederived(name))
		}
		if check != nil {
			if err := check(e, value); err != nil {
				return e, fmt.Errorf("%s=%s cannot be set on case %s: %v", name, value, e.Name, err)
			}
		}
		var probe formation.Options
		if err := spec.Set(&probe, value); err != nil {
			return e, err
		}
		applied, specs, values = append(applied, kv), append(specs, spec), append(values, value)
	}
	if len(applied) == 0 {
		return e, nil
	}
	base := e.Options
	e.Options = func() formation.Options {
		o := base()
		for i, s := range specs {
			_ = s.Set(&o, values[i]) // checked above
		}
		return o
	}
	e.FormationOptions = applied
	if o := e.Options(); o.Capacity.Aware && o.Capacity.Declared == 0 {
		return e, fmt.Errorf("capacity_aware without capacity_declared lets the runtime ask the provider during the run, and the evidence " +
			"does not record the answer the admission rule would re-derive from; use --capacity provider (the harness reads the " +
			"provider's declared max_parallel_requests before anything runs and records it as capacity_declared) or --capacity N")
	}
	return e, nil
}

// accessModes answers formation.Tools from a tool set.
type accessModes map[string]tool.Tool

func (a accessModes) ToolAccess(name string) (tool.AccessMode, bool) {
	t, ok := a[name]
	return t.Access, ok
}

// checkEntry runs the formation's configuration checks on the entry's team. The team is planned
// without scaffolding under a directory that is never created: nothing is read, written or run.
func checkEntry(e CatalogEntry, profile, language string, task *tasks.Task) error {
	c := Case{Entry: e, Profile: Profiles()[profile], Language: language, Task: task}
	caseDir := filepath.Join(os.TempDir(), "assay-formation-check")
	plans, err := c.plan(caseDir, "run-check", false)
	if err != nil {
		return err
	}
	team := runtime.Team{RunID: "run-check", Formation: e.Formation, Task: c.teamTask()}
	for _, p := range plans {
		team.Members = append(team.Members, p.Spec)
	}
	tools := accessModes(tool.Builtins())
	if e.publishes() {
		tools[tool.RemotePutName] = tool.RemotePut("http://127.0.0.1:0", nil)
	}
	return formation.Check(tools, team, caseOptions(e, caseDir))
}

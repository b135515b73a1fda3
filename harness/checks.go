package harness

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/internal/digest"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
	"github.com/assay-audit/assay/tasks"
)

// Check statuses as recorded in the evidence store (evidence.CheckStatuses): only statusPassed
// counts towards acceptance; simulated and not_enforced say what a mode did instead of a pass.
const (
	statusPassed      = evidence.CheckPassed
	statusFailed      = evidence.CheckFailed
	statusUnknown     = evidence.CheckUnknown
	statusSimulated   = evidence.CheckSimulated
	statusNotEnforced = evidence.CheckNotEnforced
)

// caseState is what the checks of one case look at: the team's result as the runtime returned it,
// and the independent sources (the files on disk, the gateway, the oracle) that do not trust it.
type caseState struct {
	runID    string
	caseDir  string
	model    string
	team     runtime.Team
	plans    []memberPlan
	result   runtime.TeamResult
	teamErr  error
	gateway  *gateway.Gateway
	store    *evidence.Store
	testTime time.Duration
	oracle   oracle.Options
	// entry is the catalog entry; its Evidence rule checks the formation's own evidence.
	entry CatalogEntry
	// language is the artifact language; spec the oracle spec for it.
	language string
	spec     oracle.Spec
	// profile is the task profile's name; goModule the go.mod scaffolded for implementing Go members.
	profile  string
	goModule string
	// task is the case's task re-derived from the run's recorded task file (recordedTask), which
	// the tests and oracle checks take their test command and spec from; taskErr why it is not.
	task    *tasks.Task
	taskErr error
	// The Python interpreters chosen once per matrix (oracle driver; pytest) and why none was.
	oraclePythonErr error
	pytestPython    oracle.Python
	pytestPythonErr error
	// redactor is the run's redaction projection; deliverables are stored through it.
	redactor *policy.Redactor
	// priorRuns are, for a resumed run, the runs it continues (first run first): their provider
	// exchanges are part of the sessions' usage.
	priorRuns []string
	// mode is the run's mode (live, dry_run, observe).
	mode string
	// modelAliases maps a requested model to another model id that may answer for it.
	modelAliases map[string]string
	// reference is true when the provider is the embedded reference provider, whose usage
	// counting rule the usage check recomputes.
	reference bool

	// What the checks read, prepared before any of them runs (prepareEvidence); no check writes it.
	proof *proof
	// trace is the case's recorded evidence arranged for re-derivation; traceErr why it is not.
	trace    *caseTrace
	traceErr error
	// journal is the team run's tool journal (every run of the lineage); journalErr why it is not.
	journal    []tool.Record
	journalErr error
	// window is every gateway record that arrived while the team ran (ids in (gwFrom, gwTo]);
	// windowErr why it could not be read. owned says whether a record (its session and id) belongs
	// to a case of this matrix run (teamRuns.owns); ownsKey whether an effect's idempotency key names
	// one of its team runs. teamFrom and teamTo bound the case's window in time: from the gateway mark
	// before the team started to when it returned.
	gwFrom, gwTo     int64
	window           []gateway.Record
	windowErr        error
	owned            func(session string, id int64) bool
	ownsKey          func(key string) bool
	teamFrom, teamTo time.Time
}

// prepareEvidence proves the deliverables, loads the trace and reads the gateway's records of the
// team's window: everything the checks read, once, before the first check runs. An error stops the
// case (the store refused an artifact); a source that cannot be read is kept as its error for the
// checks that need it to report unknown.
func (s *caseState) prepareEvidence(ctx context.Context) error {
	s.trace, s.traceErr = safeLoadTrace(ctx, s)
	if s.task == nil && s.taskErr == nil {
		s.task, s.taskErr = recordedTask(ctx, s.store, s.runID)
	}
	s.journal, s.journalErr = lineageToolRecords(ctx, s)
	s.window, s.windowErr = s.gateway.RecordsIn(ctx, s.gwFrom, s.gwTo)
	p, err := proveDeliverables(ctx, s)
	if err != nil {
		return err
	}
	s.proof = p
	return nil
}

// Check is a matrix check descriptor: adding a check is adding one value to Checks, with its test.
type Check struct {
	// Name is the check's name in tables, reports and the evidence store.
	Name string
	// Doc says what the check establishes, independently of what members said.
	Doc string
	// Required checks must pass for a case to be accepted.
	Required bool
	run      func(ctx context.Context, s *caseState) (status, detail string, evidence any)
}

// safeLoadTrace loads the trace; a panic while reading it leaves the trace unavailable (every check
// that needs it reports unknown), never a crashed process with the run left open.
func safeLoadTrace(ctx context.Context, s *caseState) (t *caseTrace, err error) {
	defer func() {
		if r := recover(); r != nil {
			t, err = nil, fmt.Errorf("internal error reading the trace: %v", r)
		}
	}()
	return loadTrace(ctx, s)
}

// safeRun runs the check; a panic in it is the check failing with an internal error, so the case is
// still finalized (rejected) rather than left open by a crashed process.
func (c Check) safeRun(ctx context.Context, s *caseState) (status, detail string, ev any) {
	defer func() {
		if r := recover(); r != nil {
			status, detail, ev = statusFailed, fmt.Sprintf("internal error in the %s check (it cannot conclude): %v", c.Name, r), nil
		}
	}()
	return c.run(ctx, s)
}

// Checks returns the matrix checks in the order they run.
func Checks() []Check {
	return []Check{filesExist, independentTests, oracleCheck, memberOutcomes, formationEvidence, effectsCheck, sessions, routing, usageConservation}
}

var filesExist = Check{
	Name: "files",
	Doc: "every implementing member's declared files exist as non-empty regular files in its directory, and their bytes are " +
		"the ones the member's succeeded calls on that path re-derive to from their asked arguments (a write_file's content, " +
		"an edit_file's operations applied by the harness to the earlier bytes; only a tool whose effect on files is opaque, " +
		"such as shell, falls back to the boundary's observation, and the detail says so): a file placed or changed by anything " +
		"else, e.g. during a pause, or bytes other than the asked ones landed by the runtime, fail; every recorded tool call was asked for, with exactly those arguments, by a recorded " +
		"response (the harness's parse of the response artifacts); nothing else is in a member's directory (every file there " +
		"is one its recorded calls produced, byte for byte, or the go.mod the harness scaffolds); the bytes are stored as artifacts; a file holding a " +
		"credential value is stored masked and fails the check",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		p := s.proof
		if p.err != nil {
			return statusUnknown, "the run's tool journal is unavailable: " + p.err.Error(), nil
		}
		if len(p.missing) > 0 || len(p.secret) > 0 || len(p.unproven) > 0 || len(p.unasked) > 0 || len(p.unaccounted) > 0 {
			var parts []string
			if len(p.unaccounted) > 0 {
				parts = append(parts, "in the members' directories but produced by no recorded call: "+strings.Join(p.unaccounted, ", "))
			}
			if len(p.unasked) > 0 {
				parts = append(parts, "tool calls the recorded responses did not ask for: "+strings.Join(p.unasked, ", "))
			}
			if len(p.missing) > 0 {
				parts = append(parts, "missing or empty: "+strings.Join(p.missing, ", "))
			}
			if len(p.unproven) > 0 {
				parts = append(parts, "not the bytes the member's asked writes and edits re-derive to: "+strings.Join(p.unproven, ", "))
			}
			if len(p.secret) > 0 {
				parts = append(parts, "holding a credential value (stored masked): "+strings.Join(p.secret, ", "))
			}
			return statusFailed, strings.Join(parts, "; "), map[string]any{"missing": p.missing, "credential": p.secret, "unproven": p.unproven,
				"unasked": p.unasked, "unaccounted": p.unaccounted, "observed_only": p.observed, "sha256": p.digests}
		}
		detail := fmt.Sprintf("%d files, each the bytes its member's asked writes and edits re-derive to", len(p.digests))
		if len(p.observed) > 0 {
			detail = fmt.Sprintf("%d files; not re-derivable from the asked arguments, so matched against the boundary's observation only: %s",
				len(p.digests), strings.Join(p.observed, ", "))
		}
		return statusPassed, detail, map[string]any{"sha256": p.digests, "observed_only": p.observed}
	},
}

var independentTests = Check{
	Name: "tests",
	Doc: "the members' own tests pass under the bounded independent runner, run by assay on a copy of each implementing " +
		"member's proven deliverables alone (the files check's: nothing else from its directory, so a file placed there by " +
		"anything but the member's recorded writes takes no part): go test -count=1 for Go, python3 -m pytest for Python " +
		"(an interpreter with pytest, chosen once)",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		if s.taskErr != nil {
			return statusUnknown, "the run's recorded task file cannot be re-derived, so its test command is unknown: " + s.taskErr.Error(), nil
		}
		command := s.task.TestCommand[s.language]
		status, parts := statusPassed, []string{}
		results := map[string]oracle.TestRunResult{}
		for _, p := range s.plans {
			if p.Artifact == "" {
				continue
			}
			dir, ok := s.proof.verified[p.Spec.ID]
			if !ok {
				status = statusFailed
				parts = append(parts, p.Spec.ID+" not run: its deliverables are not all what its asked writes re-derive to (see the files check)")
				continue
			}
			var r oracle.TestRunResult
			var err error
			switch command {
			case tasks.TestPytest:
				if s.pytestPythonErr != nil {
					return statusFailed, "no Python interpreter with pytest: " + s.pytestPythonErr.Error(), nil
				}
				r, err = oracle.RunPytestWith(ctx, s.pytestPython, dir, filepath.Join(s.caseDir, p.Spec.ID+".pytest.log"), s.testTime)
			case tasks.TestGo:
				r, err = oracle.RunGoTest(ctx, dir, filepath.Join(s.caseDir, p.Spec.ID+".go-test.json"), s.testTime)
			default:
				return statusFailed, fmt.Sprintf("task %s gives no test command assay runs for %s (%q)", s.task.Name, s.language, command), nil
			}
			if err != nil {
				return statusFailed, fmt.Sprintf("%s: %v", p.Spec.ID, err), nil
			}
			results[p.Spec.ID] = r
			parts = append(parts, fmt.Sprintf("%s %s %d/%d", p.Spec.ID, r.Verdict, r.Passed, r.Passed+r.Failed))
			if r.Verdict != "passed" {
				status = statusFailed
			}
		}
		if len(results) == 0 {
			return statusFailed, "no implementing member to test", nil
		}
		return status, strings.Join(parts, "; "), results
	},
}

var oracleCheck = Check{
	Name: "oracle",
	Doc: "the finite-domain oracle runs each member's artifact on every input of the spec's domain and compares exactly " +
		"with a trusted reference; the artifact's SHA-256 is identical before and after",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		if s.taskErr != nil {
			return statusUnknown, "the run's recorded task file cannot be re-derived, so its oracle spec is unknown: " + s.taskErr.Error(), nil
		}
		spec, err := oracleSpecFor(s.task, s.language, s.profile)
		if err != nil {
			return statusFailed, fmt.Sprintf("task %s: oracle spec: %v", s.task.Name, err), nil
		}
		if s.language == reference.LanguagePython && s.oraclePythonErr != nil {
			return statusFailed, "no Python interpreter for the oracle: " + s.oraclePythonErr.Error(), nil
		}
		status, parts := statusPassed, []string{}
		results := map[string]oracle.Result{}
		for _, p := range s.plans {
			if p.Artifact == "" {
				continue
			}
			dir, ok := s.proof.verified[p.Spec.ID]
			if !ok {
				status = statusFailed
				parts = append(parts, p.Spec.ID+" not run: its deliverables are not all what its asked writes re-derive to (see the files check)")
				continue
			}
			path := filepath.Join(dir, p.Artifact)
			r, err := oracle.Check(ctx, spec, path, s.oracle)
			if err != nil {
				status = statusFailed
				parts = append(parts, fmt.Sprintf("%s: %v", p.Spec.ID, err))
				continue
			}
			results[p.Spec.ID] = r
			after, herr := digest.File(path)
			recorded := s.proof.artifacts[p.Spec.ID]
			switch {
			case r.Verdict != "passed":
				status = statusFailed
				parts = append(parts, fmt.Sprintf("%s %s: %s", p.Spec.ID, r.Verdict, r.Detail))
			case herr != nil || recorded == "" || after != recorded || r.ArtifactSHA256 != recorded:
				status = statusFailed
				parts = append(parts, fmt.Sprintf("%s: artifact SHA-256 changed or unrecorded (recorded %q, oracle saw %q, now %q)",
					p.Spec.ID, recorded, r.ArtifactSHA256, after))
			default:
				parts = append(parts, fmt.Sprintf("%s passed %d/%d", p.Spec.ID, r.Checks, r.Expected))
			}
		}
		return status, strings.Join(parts, "; "), results
	},
}

func ptr(v int64) *int64 { return &v }

// failedRequired describes the required checks not passed, in check order.
func failedRequired(checks []evidence.Check) []string {
	var out []string
	for _, c := range checks {
		if c.Required && c.Status != statusPassed {
			out = append(out, c.Name+" "+c.Status+": "+c.Detail)
		}
	}
	return out
}

// marshalEvidence turns a check's evidence value into a JSON object, or nil.
func marshalEvidence(v any) json.RawMessage {
	if v == nil {
		return nil
	}
	b, err := json.Marshal(v)
	if err != nil || len(b) == 0 || b[0] != '{' {
		return nil
	}
	return b
}

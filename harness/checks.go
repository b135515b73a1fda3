package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// Check statuses as recorded in the evidence store.
const (
	statusPassed  = "passed"
	statusFailed  = "failed"
	statusUnknown = "unknown"
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
	// artifacts maps member id -> artifact SHA-256 hex recorded by files_exist, compared after the oracle.
	artifacts map[string]string
	// entry is the catalog entry; its Evidence rule checks the formation's own evidence.
	entry CatalogEntry
	// language is the artifact language; spec the oracle spec for it.
	language string
	spec     oracle.Spec
	// The Python interpreters chosen once per matrix (oracle driver; pytest) and why none was.
	oraclePythonErr error
	pytestPython    oracle.Python
	pytestPythonErr error
	// redactor is the run's redaction projection; deliverables are stored through it.
	redactor *policy.Redactor
	// priorRuns are, for a resumed run, the runs it continues (first run first): their provider
	// exchanges are part of the sessions' usage.
	priorRuns []string
	// verified maps member id -> the directory holding a copy of its proven deliverables alone
	// (files check); the tests and the oracle run there.
	verified map[string]string
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

// Checks returns the matrix checks in the order they run.
func Checks() []Check {
	return []Check{filesExist, independentTests, oracleCheck, memberOutcomes, formationEvidence, effectsCheck, sessions, routing, usageConservation}
}

var filesExist = Check{
	Name: "files",
	Doc: "every implementing member's declared files exist as non-empty regular files in its directory, and their bytes are " +
		"the ones the member's last recorded succeeded write of that path produced (the boundary's observation of the file " +
		"after the write, or the content a write_file reconciled as succeeded carried): a file placed or changed by anything " +
		"else, e.g. during a pause, fails; the bytes are stored as artifacts; a file holding a credential value is stored " +
		"masked and fails the check",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		var missing, secret, unproven []string
		digests := map[string]string{}
		written, err := recordedWrites(ctx, s)
		if err != nil {
			return statusUnknown, "the run's tool journal is unavailable: " + err.Error(), nil
		}
		for _, p := range s.plans {
			proven := map[string][]byte{} // the member's deliverables whose bytes its recorded writes produced
			for _, f := range p.Deliverables {
				path := filepath.Join(p.Spec.Dir, f)
				fi, err := os.Lstat(path)
				if err != nil || !fi.Mode().IsRegular() || fi.Size() == 0 {
					missing = append(missing, p.Spec.ID+"/"+f)
					continue
				}
				data, err := os.ReadFile(path)
				if err != nil {
					missing = append(missing, p.Spec.ID+"/"+f)
					continue
				}
				clean := true
				if masked := s.redactor.String(string(data)); masked != string(data) {
					// A credential never enters the store; the masked bytes are not the artifact the
					// oracle checks, so the case cannot be accepted on them.
					secret = append(secret, p.Spec.ID+"/"+f)
					data = []byte(masked)
					clean = false
				}
				sum := sha256.Sum256(data)
				if want, ok := written[p.Spec.ID+"/"+f]; !ok {
					unproven = append(unproven, p.Spec.ID+"/"+f+" (no recorded write produced it)")
					clean = false
				} else if want != hex.EncodeToString(sum[:]) {
					unproven = append(unproven, fmt.Sprintf("%s/%s (sha256 %.12s, the member's last recorded write produced %.12s)",
						p.Spec.ID, f, hex.EncodeToString(sum[:]), labelOr(want, "no file")))
					clean = false
				}
				if clean {
					proven[f] = data
				}
				d, err := s.store.PutArtifact(ctx, s.runID, "deliverable/"+p.Spec.ID+"/"+f, "text/plain", data)
				if err != nil {
					return statusFailed, fmt.Sprintf("store artifact %s/%s: %v", p.Spec.ID, f, err), nil
				}
				digests[p.Spec.ID+"/"+f] = d
				if f == p.Artifact {
					s.artifacts[p.Spec.ID] = d
				}
			}
			if len(p.Deliverables) > 0 && len(proven) == len(p.Deliverables) {
				dir, err := s.verifiedCopy(p.Spec.ID, proven)
				if err != nil {
					return statusFailed, fmt.Sprintf("%s: copy the proven deliverables: %v", p.Spec.ID, err), nil
				}
				s.verified[p.Spec.ID] = dir
			}
		}
		if len(missing) > 0 || len(secret) > 0 || len(unproven) > 0 {
			var parts []string
			if len(missing) > 0 {
				parts = append(parts, "missing or empty: "+strings.Join(missing, ", "))
			}
			if len(unproven) > 0 {
				parts = append(parts, "not the bytes the member's recorded writes produced: "+strings.Join(unproven, ", "))
			}
			if len(secret) > 0 {
				parts = append(parts, "holding a credential value (stored masked): "+strings.Join(secret, ", "))
			}
			return statusFailed, strings.Join(parts, "; "), map[string]any{"missing": missing, "credential": secret, "unproven": unproven, "sha256": digests}
		}
		return statusPassed, fmt.Sprintf("%d files", len(digests)), map[string]any{"sha256": digests}
	},
}

// verifiedCopy writes a member's proven deliverables, and for Go the module file the harness
// scaffolds, into a fresh directory of its own under the case directory
// (verified-<run>/<member>), and returns it: what the tests and the oracle run on.
func (s *caseState) verifiedCopy(member string, files map[string][]byte) (string, error) {
	dir := filepath.Join(s.caseDir, "verified-"+s.runID, member)
	if err := os.RemoveAll(dir); err != nil {
		return "", err
	}
	if s.language == reference.LanguageGo {
		files["go.mod"] = []byte(goModule)
	}
	for name, data := range files {
		p := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return "", err
		}
		if err := os.WriteFile(p, data, 0o644); err != nil {
			return "", err
		}
	}
	return dir, nil
}

// recordedWrites returns, for "member/path", the SHA-256 hex of the file the member's last
// succeeded call touching that path left ("" when it left none), from the team run's tool journal
// (every run of the team run: lineageToolRecords). The observation is the boundary's
// (Outcome.Files); a write_file whose success was established by reconciliation has none, and its
// intent's content is what it wrote.
func recordedWrites(ctx context.Context, s *caseState) (map[string]string, error) {
	intents := map[string]tool.Intent{}
	out := map[string]string{}
	recs, err := lineageToolRecords(ctx, s)
	if err != nil {
		return nil, err
	}
	{
		for _, r := range recs {
			if r.Intent != nil {
				intents[r.Intent.IdempotencyKey] = *r.Intent
				continue
			}
			o := r.Outcome
			if o.State != tool.StateSucceeded || o.Simulated {
				continue
			}
			for p, sum := range o.Files {
				out[o.MemberID+"/"+p] = sum
			}
			in, ok := intents[o.IdempotencyKey]
			if len(o.Files) == 0 && ok && in.Tool == "write_file" && (o.Source == "reconciliation" || o.Source == "operator") {
				var a struct {
					Path    string `json:"path"`
					Content string `json:"content"`
				}
				if json.Unmarshal(in.Arguments, &a) == nil && a.Path != "" {
					sum := sha256.Sum256([]byte(a.Content))
					out[o.MemberID+"/"+path.Clean(a.Path)] = hex.EncodeToString(sum[:])
				}
			}
		}
	}
	return out, nil
}

var independentTests = Check{
	Name: "tests",
	Doc: "the members' own tests pass under the bounded independent runner, run by assay on a copy of each implementing " +
		"member's proven deliverables alone (the files check's: nothing else from its directory, so a file placed there by " +
		"anything but the member's recorded writes takes no part): go test -count=1 for Go, python3 -m pytest for Python " +
		"(an interpreter with pytest, chosen once)",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		status, parts := statusPassed, []string{}
		results := map[string]oracle.TestRunResult{}
		for _, p := range s.plans {
			if p.Artifact == "" {
				continue
			}
			dir, ok := s.verified[p.Spec.ID]
			if !ok {
				status = statusFailed
				parts = append(parts, p.Spec.ID+" not run: its deliverables are not all what its recorded writes produced (see the files check)")
				continue
			}
			var r oracle.TestRunResult
			var err error
			if s.language == reference.LanguagePython {
				if s.pytestPythonErr != nil {
					return statusFailed, "no Python interpreter with pytest: " + s.pytestPythonErr.Error(), nil
				}
				r, err = oracle.RunPytestWith(ctx, s.pytestPython, dir, filepath.Join(s.caseDir, p.Spec.ID+".pytest.log"), s.testTime)
			} else {
				r, err = oracle.RunGoTest(ctx, dir, filepath.Join(s.caseDir, p.Spec.ID+".go-test.json"), s.testTime)
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
		spec := s.spec
		if s.language == reference.LanguagePython && s.oraclePythonErr != nil {
			return statusFailed, "no Python interpreter for the oracle: " + s.oraclePythonErr.Error(), nil
		}
		status, parts := statusPassed, []string{}
		results := map[string]oracle.Result{}
		for _, p := range s.plans {
			if p.Artifact == "" {
				continue
			}
			dir, ok := s.verified[p.Spec.ID]
			if !ok {
				status = statusFailed
				parts = append(parts, p.Spec.ID+" not run: its deliverables are not all what its recorded writes produced (see the files check)")
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
			after, herr := fileSHA256(path)
			recorded := s.artifacts[p.Spec.ID]
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

var memberOutcomes = Check{
	Name:     "members",
	Doc:      "every member that had to run ran, every member that ran succeeded, and no unknown member ran",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		if s.teamErr != nil {
			return statusFailed, "team did not run: " + s.teamErr.Error(), nil
		}
		var failed []string
		ran := map[string]bool{}
		for _, m := range s.result.Members {
			ran[m.MemberID] = true
			if !m.Success {
				failed = append(failed, m.MemberID+": "+m.Error)
			}
		}
		planned := map[string]bool{}
		for _, p := range s.plans {
			planned[p.Spec.ID] = true
			if !p.Optional && !ran[p.Spec.ID] {
				failed = append(failed, p.Spec.ID+": did not run")
			}
		}
		for id := range ran {
			if !planned[id] {
				failed = append(failed, id+": not a member of the case")
			}
		}
		if !s.result.Success && len(failed) == 0 {
			failed = append(failed, "the formation reported failure: "+s.result.FinalOutput)
		}
		if len(failed) > 0 {
			sort.Strings(failed)
			return statusFailed, strings.Join(failed, "; "), nil
		}
		return statusPassed, fmt.Sprintf("%d succeeded", len(s.result.Members)), nil
	},
}

var sessions = Check{
	Name: "sessions",
	Doc: "member session ids are distinct, each is {run_id}-{member_id}, and they are exactly the session ids the " +
		"gateway saw for this run (a resumed run: for the run it continues, whose ids it keeps), with as many requests per session as the runtime made",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		records, err := s.gateway.Records(ctx, s.team.RunID+"-", true)
		if err != nil {
			return statusUnknown, "gateway records unavailable: " + err.Error(), nil
		}
		seen := map[string]int{}
		for _, r := range records {
			seen[r.SessionID]++
		}
		var problems []string
		expected := map[string]int{}
		for _, m := range s.result.Members {
			want := s.team.RunID + "-" + m.MemberID
			if m.SessionID != want {
				problems = append(problems, fmt.Sprintf("%s used session %q, want %q", m.MemberID, m.SessionID, want))
			}
			if _, dup := expected[m.SessionID]; dup {
				problems = append(problems, fmt.Sprintf("session %q shared", m.SessionID))
			}
			expected[m.SessionID] = m.HTTPAttempts
		}
		for sid, n := range expected {
			if seen[sid] != n {
				problems = append(problems, fmt.Sprintf("%s: gateway saw %d requests, runtime sent %d", sid, seen[sid], n))
			}
		}
		var extra []string
		for sid := range seen {
			if _, ok := expected[sid]; !ok {
				extra = append(extra, sid)
			}
		}
		sort.Strings(extra)
		for _, sid := range extra {
			problems = append(problems, fmt.Sprintf("gateway saw unexpected session %q", sid))
		}
		if len(s.result.Members) == 0 {
			problems = append(problems, "no member results")
		}
		ev := map[string]any{"gateway_requests": seen, "runtime_requests": expected}
		if len(problems) > 0 {
			return statusFailed, strings.Join(problems, "; "), ev
		}
		return statusPassed, fmt.Sprintf("%d distinct, matched on the wire", len(expected)), ev
	},
}

var routing = Check{
	Name: "routing",
	Doc: "every request of this run reached the configured model on the chat-completions path (statuses other than 200 " +
		"are reported in the detail; what they did to usage is the usage check's)",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		records, err := s.gateway.Records(ctx, s.team.RunID+"-", true)
		if err != nil {
			return statusUnknown, "gateway records unavailable: " + err.Error(), nil
		}
		if len(records) == 0 {
			return statusFailed, "the gateway saw no request for this run", nil
		}
		var problems []string
		other := 0
		for _, r := range records {
			if r.Model != s.model || !strings.HasSuffix(r.Path, "/chat/completions") {
				problems = append(problems, fmt.Sprintf("request %d (%s): model %q path %s", r.ID, r.SessionID, r.Model, r.Path))
			}
			if r.Status != 200 {
				other++
			}
		}
		if len(problems) > 0 {
			return statusFailed, strings.Join(problems, "; "), nil
		}
		detail := fmt.Sprintf("%d requests to %s", len(records), s.model)
		if other > 0 {
			detail += fmt.Sprintf(" (%d answered with a status other than 200)", other)
		}
		return statusPassed, detail, nil
	},
}

var usageConservation = Check{
	Name: "usage",
	Doc: "per member session, token usage is conserved across the wire (gateway records), the store (the runtime's " +
		"provider_exchange events) and the gateway's usage endpoint, summed over calls keyed by assay's own call ids; " +
		"usage a source did not report is unknown, never zero",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		calls, rows, err := collectUsage(ctx, s)
		if err != nil {
			return statusUnknown, err.Error(), nil
		}
		if err := s.store.RecordUsageCalls(ctx, s.runID, calls...); err != nil {
			return statusFailed, "record usage calls: " + err.Error(), nil
		}
		if err := s.store.RecordUsage(ctx, s.runID, rows...); err != nil {
			return statusFailed, "record usage: " + err.Error(), nil
		}
		verdicts := evidence.ReconcileUsageCalls(calls, rows)
		if err := s.store.RecordUsageVerdicts(ctx, s.runID, verdicts); err != nil {
			return statusFailed, "record usage verdicts: " + err.Error(), nil
		}
		if len(verdicts) == 0 {
			return statusUnknown, "no member usage to reconcile", nil
		}
		status, parts := statusPassed, []string{}
		for _, v := range verdicts {
			switch v.Verdict {
			case "conserved":
				parts = append(parts, v.MemberID+" conserved")
			case "unknown":
				if status == statusPassed {
					status = statusUnknown
				}
				parts = append(parts, fmt.Sprintf("%s unknown (%s)", v.MemberID, v.Detail))
			default:
				status = statusFailed
				parts = append(parts, fmt.Sprintf("%s %s (%s)", v.MemberID, v.Verdict, v.Detail))
			}
		}
		return status, strings.Join(parts, "; "), verdicts
	},
}

func ptr(v int64) *int64 { return &v }

func fileSHA256(path string) (string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:]), nil
}

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

// effectsCheck reads the run's recorded tool calls back from the store, folds them through the
// effect lifecycle (tool.Replay: an intent without an outcome is unknown), and asks the effect
// service's database — not the runtime — about every remote_put.
var effectsCheck = Check{
	Name: "effects",
	Doc: "no tool call's effect is left unknown (unknown means it may have committed: reconciliation required) or awaiting " +
		"approval (an unapproved action is unfinished work); every " +
		"remote_put the evidence says succeeded has a committed receipt for its idempotency key, for the same payload, sent " +
		"once, in the effect service's database (OUT/" + EffectsDBName + ", read directly); one the evidence says failed has none",
	Required: true,
	run: func(ctx context.Context, s *caseState) (string, string, any) {
		records, err := lineageToolRecords(ctx, s)
		if err != nil {
			return statusUnknown, "tool records unavailable: " + err.Error(), nil
		}
		effs, err := tool.Replay(records, false)
		if err != nil {
			return statusFailed, "the recorded tool calls do not replay: " + err.Error(), nil
		}
		var unknown, awaiting, problems []string
		var firstUnknown tool.Effect
		var remote []tool.Effect
		simulated := 0
		for _, e := range effs {
			if e.State == effect.AwaitingApproval {
				awaiting = append(awaiting, fmt.Sprintf("%s (%s)", e.IdempotencyKey, e.Tool))
			}
			if e.State == effect.Unknown {
				if len(unknown) == 0 {
					firstUnknown = e
				}
				unknown = append(unknown, fmt.Sprintf("%s (%s)", e.IdempotencyKey, e.Tool))
			}
			if e.Tool == tool.RemotePutName && e.Dispatched {
				if e.Mode == tool.DryRun {
					simulated++ // simulated, never sent: no receipt to expect (and dry_run certifies nothing)
					continue
				}
				remote = append(remote, e)
			}
		}
		// Fail closed: every publishing member must have a remote_put the receipts can be checked
		// for; one whose effects cannot be recognised (a tool name the redactor masked, say) is
		// not taken as having published nothing to check.
		for _, m := range s.entry.Members {
			if !m.Publishes {
				continue
			}
			if !slices.ContainsFunc(remote, func(e tool.Effect) bool { return e.MemberID == m.ID }) && simulated == 0 {
				problems = append(problems, fmt.Sprintf("publishing member %s has no remote_put effect whose receipt can be checked", m.ID))
			}
		}
		ev := map[string]any{"effects": len(effs), "unknown": unknown}
		var lookupErr error
		if len(remote) > 0 {
			var receipts []remoteReceipt
			receipts, lookupErr = remoteReceipts(ctx, s, remote)
			ev["remote_put"] = receipts
			for _, r := range receipts {
				if r.Problem != "" {
					problems = append(problems, r.IdempotencyKey+": "+r.Problem)
				}
			}
		}
		if lookupErr != nil {
			if len(unknown) == 0 && len(problems) == 0 {
				// Nothing contradicts the evidence, and nothing confirms it either.
				return statusUnknown, "remote_put receipts cannot be checked: " + lookupErr.Error(), ev
			}
			problems = append(problems, "and the rest cannot be checked: "+lookupErr.Error())
		}
		if len(unknown) > 0 {
			// The effect's intent is in the run that dispatched it (the first of a resumed lineage).
			problems = append([]string{fmt.Sprintf("reconciliation required: %d effect(s) unknown (may have committed): %s; "+
				"see 'assay effects %s --state unknown', resolve with 'assay reconcile %s %s --lookup' (or --outcome)",
				len(unknown), strings.Join(unknown, ", "), firstUnknown.RunID, firstUnknown.RunID, firstUnknown.IdempotencyKey)}, problems...)
		}
		if len(awaiting) > 0 {
			// An action policy asked about and nobody approved is unfinished work, whatever the
			// member said and whatever is on disk.
			problems = append(problems, fmt.Sprintf("%d call(s) still await approval: %s", len(awaiting), strings.Join(awaiting, ", ")))
		}
		ev["awaiting_approval"] = awaiting
		if len(problems) > 0 {
			return statusFailed, strings.Join(problems, "; "), ev
		}
		detail := fmt.Sprintf("%d effects, none unknown, none awaiting approval", len(effs))
		if len(remote) > 0 {
			detail += fmt.Sprintf("; %d remote_put receipt(s) match the evidence", len(remote))
		}
		if simulated > 0 {
			detail += fmt.Sprintf("; %d remote_put simulated (dry_run), no receipt expected", simulated)
		}
		return statusPassed, detail, ev
	},
}

// lineageToolRecords returns the journal records of the run and, for a resumed run, of the runs it
// continues and their corrections, in creation order (the records Replay needs: an outcome
// recorded by a resume or a reconciliation belongs to an intent of an earlier run).
func lineageToolRecords(ctx context.Context, s *caseState) ([]tool.Record, error) {
	runs, err := s.store.Runs(ctx)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	return FamilyRecords(ctx, s.store, runs, s.runID)
}

// remoteReceipt is what the effects check found at the backend for one remote_put.
type remoteReceipt struct {
	IdempotencyKey string `json:"idempotency_key"`
	State          string `json:"state"`
	Found          bool   `json:"receipt_found"`
	Reference      string `json:"reference,omitempty"`
	Puts           int64  `json:"puts,omitempty"`
	PayloadMatches bool   `json:"payload_matches,omitempty"`
	// Problem says why the evidence and the backend disagree; "" when they agree.
	Problem string `json:"problem,omitempty"`
}

// remoteReceipts looks up every remote_put of effs in the effect service's database of the run's
// output directory (the case directory is OUT/cases/<run>, DESIGN.md's layout). An error means the
// database could not be read: no receipt is then asserted either way.
func remoteReceipts(ctx context.Context, s *caseState, effs []tool.Effect) ([]remoteReceipt, error) {
	outDir := filepath.Dir(filepath.Dir(s.caseDir))
	db, err := OpenEffectsBackend(ctx, outDir)
	if err != nil {
		return nil, fmt.Errorf("effect service database: %w", err)
	}
	defer db.Close()
	var out []remoteReceipt
	for _, e := range effs {
		r := remoteReceipt{IdempotencyKey: e.IdempotencyKey, State: string(e.State)}
		rc, found, err := db.Receipt(ctx, e.IdempotencyKey)
		if err != nil {
			return out, fmt.Errorf("effect service database: %w", err)
		}
		r.Found = found
		if found {
			r.Reference, r.Puts, r.PayloadMatches = rc.Reference, rc.Puts, rc.PayloadSHA256 == e.PayloadSHA256
		}
		switch {
		case e.State == effect.Succeeded && !found:
			r.Problem = "the evidence says remote_put succeeded, but the effect service has no receipt for it"
		case e.State == effect.Failed && found:
			r.Problem = fmt.Sprintf("the evidence says remote_put failed, but the effect service committed it (receipt %s)", rc.Reference)
		case found && !r.PayloadMatches:
			r.Problem = fmt.Sprintf("the effect service committed another payload under this key (sha256 %s, intent %s)", rc.PayloadSHA256, e.PayloadSHA256)
		case found && rc.Puts > 1:
			r.Problem = fmt.Sprintf("the effect service received %d PUTs for this key: the effect was sent more than once", rc.Puts)
		}
		out = append(out, r)
	}
	return out, nil
}

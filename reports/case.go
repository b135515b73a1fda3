package reports

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/jsonconv"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/tool"
)

// loader reads what a case needs beyond its RunSummary.
type loader struct {
	store  *evidence.Store
	outDir string
	// linked lists, by run id, the runs whose CorrectsRunID names it.
	linked map[string][]evidence.RunSummary
	// replayVerdicts caches replay runs' verdicts by run id.
	replayVerdicts map[string]string
}

// loadCase builds the case of run r, whose trace is evs, and the environment its envelope was bound to.
func (l *loader) loadCase(ctx context.Context, r evidence.RunSummary, evs []evidence.StoredEvent) (Case, Environment, error) {
	e := r.Envelope
	c := Case{Name: e.Case, NameRecorded: e.Case != "", Formation: e.Formation, Profile: e.TaskProfile, Language: e.Language,
		RunID: r.RunID, Kind: "case", Tenant: e.Tenant, Mode: e.Mode, Status: r.Status, Interrupted: r.Interrupted,
		Provider: e.Provider, BaseURL: e.BaseURL, Model: e.Model, Reference: isReference(e), Task: e.Task, Repeat: e.Repeat,
		CreatedAt: r.CreatedAt, FinalizedAt: r.FinalizedAt, TerminalHash: r.TerminalHash, TerminalVersion: r.TerminalVersion,
		ManifestDigest: e.ManifestDigest, EnvelopeDigest: r.EnvelopeDigest, PolicyDigest: e.PolicyDigest,
		EnvironmentFingerprint: e.EnvironmentFingerprint, EventCount: r.EventCount, InvocationID: e.InvocationID,
		Reasons: []string{}, Checks: []Check{}, Members: []Member{}, Approvals: []Approval{}, Reconciliations: []Reconciliation{},
		Links: []Link{}}
	if !c.NameRecorded {
		c.Name = CaseNotRecorded
	}
	if r.Verdict != nil {
		c.Verdict = r.Verdict.Verdict
		c.Reasons = append(c.Reasons, r.Verdict.Reasons...)
	}
	if r.FinalizedAt != nil {
		s := r.FinalizedAt.Sub(r.CreatedAt).Seconds()
		c.WallSeconds = &s
	}
	for _, ch := range r.Checks {
		chk := Check{Name: ch.Name, Required: ch.Required, Status: ch.Status, Detail: ch.Detail}
		if conv, err := jsonconv.Evidence(ch.Evidence); err == nil && conv != nil {
			chk.EvidenceJSON = conv
			readable, _ := jsonconv.Readable(ch.Evidence)
			chk.Evidence = readableJSON(readable)
		} else if len(ch.Evidence) > 0 {
			chk.Evidence = readableJSON(ch.Evidence) // not JSON: shown as recorded
		}
		c.Checks = append(c.Checks, chk)
	}
	c.Members = membersOf(r, evs)
	c.Phases = phasesOf(r, evs)
	c.Approvals, c.Reconciliations = effectsOf(r.RunID, evs)
	if err := l.lineage(ctx, r, evs, &c); err != nil {
		return Case{}, Environment{}, err
	}
	c.Links = l.links(r)
	tf, err := l.taskFile(ctx, r, c.Checks)
	if err != nil {
		return Case{}, Environment{}, err
	}
	c.TaskFile = tf
	env, err := l.environment(ctx, r)
	if err != nil {
		return Case{}, Environment{}, err
	}
	return c, env, nil
}

// isReference reports whether e's run used the embedded reference provider: named "reference",
// answering as its default model, or (a matrix file names it, e.g. "ref-a", and gives it another
// model id) with no base URL on a run that is not a replay's cassette. Saying "reference" of a run
// that was is never wrong; saying nothing of one would present reference results as a model's.
//
// A run that observed an external system (`assay usage reconcile --into`: provider "external",
// no base URL of its own) used no provider of assay's and is never a reference run.
func isReference(e evidence.Envelope) bool {
	if e.Provider == externalProvider {
		return false
	}
	return e.Provider == referenceProvider || e.Model == referenceModel || (e.BaseURL == "" && e.Provider != replayProvider)
}

// externalProvider is the provider name of a run that recorded what an external system did
// (harness/claims: usage reconcile --into), not a run of assay's provider client.
const externalProvider = "external"

// membersOf lists the run's members from its usage rows and its members' events, with each
// source's reading and the usage verdict.
func membersOf(r evidence.RunSummary, evs []evidence.StoredEvent) []Member {
	byID := map[string]*Member{}
	var order []string
	get := func(id, session string) *Member {
		m, ok := byID[id]
		if !ok {
			m = &Member{ID: id, Usage: []Usage{}}
			byID[id] = m
			order = append(order, id)
		}
		if m.SessionID == "" {
			m.SessionID = session
		}
		return m
	}
	for _, ev := range evs {
		if ev.MemberID != "" {
			get(ev.MemberID, ev.SessionID)
		}
	}
	for _, u := range r.Usage {
		id := u.MemberID
		if id == "" {
			id = u.SessionID
		}
		m := get(id, u.SessionID)
		reqs := int64(u.Requests)
		m.Usage = append(m.Usage, Usage{Source: u.Source, State: u.State, Requests: &reqs, PromptTokens: u.PromptTokens,
			CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens})
	}
	for _, v := range r.UsageVerdicts {
		id := v.MemberID
		if id == "" {
			id = v.SessionID
		}
		m := get(id, v.SessionID)
		m.Conservation, m.ConservationDetail = v.Verdict, v.Detail
		// The verdict's per-source accounts, for a source the session rows do not hold.
		for src, su := range v.Sources {
			if slices.ContainsFunc(m.Usage, func(u Usage) bool { return u.Source == src }) {
				continue
			}
			reqs := int64(su.Requests)
			u := Usage{Source: src, State: su.State, PromptTokens: su.PromptTokens, CompletionTokens: su.CompletionTokens,
				TotalTokens: su.TotalTokens}
			if su.State != "missing" {
				u.Requests = &reqs
			}
			m.Usage = append(m.Usage, u)
		}
	}
	sort.Strings(order)
	out := make([]Member, 0, len(order))
	for _, id := range order {
		m := byID[id]
		slices.SortFunc(m.Usage, func(a, b Usage) int {
			return slices.Index(usageSources, a.Source) - slices.Index(usageSources, b.Source)
		})
		out = append(out, *m)
	}
	return out
}

// phasesOf derives the run's timings from its events' timestamps and the durations its tests and
// oracle checks recorded. A phase the evidence does not give is present with Seconds nil.
func phasesOf(r evidence.RunSummary, evs []evidence.StoredEvent) []Phase {
	var teamStart, teamEnd, lastCheck, finalized *evidence.StoredEvent
	for i := range evs {
		ev := &evs[i]
		switch ev.Type {
		case event.TypeTeamStarted:
			if teamStart == nil {
				teamStart = ev
			}
		case event.TypeTeamCompleted:
			teamEnd = ev
		case event.TypeCheckCompleted, evidence.EventCheckRecorded:
			lastCheck = ev
		case evidence.EventRunFinalized:
			finalized = ev
		}
	}
	between := func(name string, a, b *evidence.StoredEvent, what, missing string) Phase {
		if a == nil || b == nil || b.Time.Before(a.Time) {
			return Phase{Name: name, Note: missing}
		}
		s := b.Time.Sub(a.Time).Seconds()
		return Phase{Name: name, Seconds: &s, Note: what}
	}
	phases := []Phase{between("team", teamStart, teamEnd, "team_started to team_completed",
		"not recorded (no team_started and team_completed events)")}
	for _, name := range []string{"tests", "oracle"} {
		phases = append(phases, checkDuration(r, name))
	}
	phases = append(phases, between("checks", teamEnd, lastCheck,
		"team_completed to the last check recorded (every check, including tests and oracle)",
		"not recorded (no team_completed event or no check recorded after it)"))
	phases = append(phases, between("finalize", lastCheck, finalized, "the last check recorded to run_finalized",
		"not recorded (the run was not finalized after its checks)"))
	return phases
}

// checkDuration sums the per-member durations (nanoseconds, key "Duration") the tests or oracle
// check recorded in its evidence.
func checkDuration(r evidence.RunSummary, name string) Phase {
	missing := Phase{Name: name, Note: "not recorded (the " + name + " check recorded no durations)"}
	i := slices.IndexFunc(r.Checks, func(c evidence.Check) bool { return c.Name == name })
	if i < 0 || len(r.Checks[i].Evidence) == 0 {
		return missing
	}
	var byMember map[string]struct {
		Duration *int64 `json:"Duration"`
	}
	if json.Unmarshal(r.Checks[i].Evidence, &byMember) != nil || len(byMember) == 0 {
		return missing
	}
	var ns int64
	for _, m := range byMember {
		if m.Duration == nil {
			return missing
		}
		ns += *m.Duration
	}
	s := float64(ns) / 1e9
	return Phase{Name: name, Seconds: &s, Note: fmt.Sprintf("sum over %d members, as the %s check recorded", len(byMember), name)}
}

// effectsOf lists the approvals the run's tool calls consumed and its effects whose outcome was
// unknown or decided by reconciliation.
func effectsOf(runID string, evs []evidence.StoredEvent) ([]Approval, []Reconciliation) {
	approvals, recs := []Approval{}, []Reconciliation{}
	for _, ev := range evs {
		switch ev.Type {
		case event.TypeToolCall:
			p, err := event.Decode[event.ToolCall](ev.Type, ev.Payload)
			if err != nil || p.Approval == nil {
				continue
			}
			at := ev.Time
			approvals = append(approvals, Approval{Approver: p.Approval.Approver, PayloadSHA256: p.PayloadSHA256, Tool: p.Tool,
				CallID: p.CallID, At: &at})
		case event.TypeToolResult:
			p, err := event.Decode[event.ToolResult](ev.Type, ev.Payload)
			if err != nil {
				continue
			}
			decided := p.Source == "reconciliation" || p.Source == "operator"
			if p.State != tool.StateUnknown && !decided {
				continue
			}
			rec := Reconciliation{IdempotencyKey: p.IdempotencyKey, Tool: p.Tool, Outcome: string(p.State), Note: p.Note}
			if decided {
				rec.Source, rec.RecordedInRunID = p.Source, runID
			}
			recs = append(recs, rec)
		}
	}
	return approvals, recs
}

// lineage fills c.Lineage (and c.Kind, c.Replay) from the run's events and the runs linked to it.
func (l *loader) lineage(ctx context.Context, r evidence.RunSummary, evs []evidence.StoredEvent, c *Case) error {
	c.Lineage = Lineage{CorrectsRunID: r.CorrectsRunID, CorrectedBy: []string{}, ReplayedBy: []ReplayRef{}}
	for _, ev := range evs {
		switch ev.Type {
		case event.TypeRunResumed:
			if p, err := event.Decode[event.RunResumed](ev.Type, ev.Payload); err == nil {
				c.Kind, c.Lineage.ResumesRunID = "resume", p.ResumesRunID
				seq := p.CheckpointSeq
				c.Lineage.CheckpointSeq = &seq
			}
		case event.TypeReplayStarted:
			if p, err := event.Decode[event.ReplayStarted](ev.Type, ev.Payload); err == nil {
				c.Kind = "replay"
				if c.Replay == nil {
					c.Replay = &ReplayResult{}
				}
				c.Replay.ReplaysRunID, c.Replay.Tolerance = p.ReplaysRunID, p.Tolerance
			}
		case event.TypeReplayVerdict:
			if p, err := event.Decode[event.ReplayVerdict](ev.Type, ev.Payload); err == nil {
				if c.Replay == nil {
					c.Replay = &ReplayResult{}
				}
				c.Replay.Verdict, c.Replay.Reason = p.Verdict, p.Reason
			}
		}
	}
	if c.Kind == "case" && r.CorrectsRunID != "" {
		c.Kind = "correction"
	}
	for _, o := range l.linked[r.RunID] {
		switch {
		case o.Envelope.Provider == replayProvider:
			v, err := l.replayVerdict(ctx, o.RunID)
			if err != nil {
				return err
			}
			c.Lineage.ReplayedBy = append(c.Lineage.ReplayedBy, ReplayRef{RunID: o.RunID, Verdict: v})
		case len(o.Checkpoints) > 0 || o.Status != evidence.StatusFinalized ||
			slices.ContainsFunc(o.Artifacts, func(a evidence.ArtifactLink) bool { return a.Name == "manifest.json" }):
			// What a resume writes first (harness.ResumedBy): its manifest, or checkpoints.
			c.Lineage.ResumedByRunID = o.RunID
		default:
			c.Lineage.CorrectedBy = append(c.Lineage.CorrectedBy, o.RunID)
		}
	}
	return nil
}

// replayVerdict returns the verdict replay run id recorded, "" when none.
func (l *loader) replayVerdict(ctx context.Context, id string) (string, error) {
	if v, ok := l.replayVerdicts[id]; ok {
		return v, nil
	}
	evs, err := l.store.Events(ctx, id)
	if err != nil {
		return "", fmt.Errorf("reports: replay run %s: %w", id, err)
	}
	v := ""
	for _, ev := range evs {
		if ev.Type == event.TypeReplayVerdict {
			if p, err := event.Decode[event.ReplayVerdict](ev.Type, ev.Payload); err == nil {
				v = p.Verdict
			}
		}
	}
	l.replayVerdicts[id] = v
	return v, nil
}

// links lists the run's evidence files that exist under the out directory: its case directory,
// each member's test log (the tests check's OutputPath) and oracle report and log (the oracle
// check's WorkDir).
func (l *loader) links(r evidence.RunSummary) []Link {
	out := []Link{}
	add := func(label, path string) {
		if path == "" {
			return
		}
		if !filepath.IsAbs(path) {
			path = filepath.Join(l.outDir, path)
		}
		rel, err := filepath.Rel(l.outDir, path)
		if err != nil || rel == ".." || strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			return // outside the out directory: not a link a report can carry
		}
		if _, err := os.Stat(path); err != nil {
			return
		}
		out = append(out, Link{Label: label, Path: filepath.ToSlash(rel)})
	}
	add("case directory", filepath.Join("cases", r.RunID))
	for _, name := range []string{"tests", "oracle"} {
		i := slices.IndexFunc(r.Checks, func(c evidence.Check) bool { return c.Name == name })
		if i < 0 || len(r.Checks[i].Evidence) == 0 {
			continue
		}
		var byMember map[string]struct {
			OutputPath string `json:"OutputPath"`
			WorkDir    string `json:"WorkDir"`
		}
		if json.Unmarshal(r.Checks[i].Evidence, &byMember) != nil {
			continue
		}
		members := make([]string, 0, len(byMember))
		for m := range byMember {
			members = append(members, m)
		}
		sort.Strings(members)
		for _, m := range members {
			v := byMember[m]
			if name == "tests" {
				add("test log "+m, v.OutputPath)
				continue
			}
			if v.WorkDir == "" {
				continue
			}
			reports, _ := filepath.Glob(filepath.Join(v.WorkDir, "report-*", "report.json"))
			sort.Strings(reports)
			for _, p := range reports {
				add("oracle report "+m, p)
			}
			add("oracle log "+m, filepath.Join(v.WorkDir, "run.log"))
		}
	}
	return out
}

// environment reads the run's environment preimage (evidence.EnvironmentArtifact) and re-derives
// the envelope's fingerprint from it. A preimage the store cannot give back (missing or corrupt
// payload) is reported as unreadable, with Matches unknown; other errors (the store's) are returned.
func (l *loader) environment(ctx context.Context, r evidence.RunSummary) (Environment, error) {
	env := Environment{Fingerprint: r.Envelope.EnvironmentFingerprint}
	i := slices.IndexFunc(r.Artifacts, func(a evidence.ArtifactLink) bool { return a.Name == evidence.EnvironmentArtifact })
	if i < 0 {
		return env, nil
	}
	env.Recorded = true
	b, err := l.store.Artifact(ctx, r.Artifacts[i].Digest)
	if errors.Is(err, evidence.ErrArtifactMissing) || errors.Is(err, evidence.ErrArtifactCorrupt) {
		env.PreimageUnreadable = err.Error()
		return env, nil
	}
	if err != nil {
		return Environment{}, fmt.Errorf("reports: run %s: %s: %w", r.RunID, evidence.EnvironmentArtifact, err)
	}
	matches := evidence.FingerprintOf(b) == env.Fingerprint
	env.Matches = &matches
	if p, err := evidence.ParseEnvironment(b); err == nil {
		env.FingerprintVersion = p.FingerprintVersion
		if env.FingerprintVersion == 0 {
			env.FingerprintVersion = 1
		}
		env.AssayVersion, env.Commit, env.CommitTime, env.Modified = p.Assay, p.VCSRevision, p.VCSTime, p.VCSModified
		env.GoVersion, env.GOOS, env.GOARCH = p.Go, p.GOOS, p.GOARCH
	}
	return env, nil
}

// readableJSON renders a check's evidence object as one "key: value" line per field, in key order,
// each value as compact JSON (strings unquoted), never in Go's map syntax; "" for none.
func readableJSON(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var obj map[string]json.RawMessage
	if json.Unmarshal(raw, &obj) != nil {
		return compactJSON(raw)
	}
	keys := make([]string, 0, len(obj))
	for k := range obj {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	var b strings.Builder
	for _, k := range keys {
		v := obj[k]
		var s string
		if json.Unmarshal(v, &s) != nil || string(v) == "null" {
			s = compactJSON(v)
		}
		fmt.Fprintf(&b, "%s: %s\n", k, s)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

// compactJSON is raw without insignificant whitespace and without HTML escapes.
func compactJSON(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(b.String(), "\n")
}

package reports

import (
	"cmp"
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/assay-audit/assay/evidence"
)

// Names the embedded reference provider is recorded under (DESIGN.md): results obtained with it are
// reference results, never a language model's.
const (
	referenceProvider = "reference"
	referenceModel    = "assay-reference-1"
	// replayProvider is a replay run's envelope provider (harness.ReplayProvider; reports does not
	// import harness).
	replayProvider = "cassette"
)

// Load builds the report of the runs sel selects, read only from store (opened by the caller;
// read-only is enough) and the evidence files under the store's directory. The report's links are
// relative to that directory (Report.Rebase moves them).
//
// Errors: an error wrapping evidence.ErrNoRun naming a run of sel.RunIDs the store lacks; the
// store's errors (evidence.ErrClosed, ...); ctx's error.
func Load(ctx context.Context, store *evidence.Store, sel Selection) (Report, error) {
	all, err := store.Runs(ctx)
	if err != nil {
		return Report{}, err
	}
	var axis GroupAxis
	if sel.GroupBy != "" {
		var ok bool
		if axis, ok = LookupGroupAxis(sel.GroupBy); !ok {
			return Report{}, fmt.Errorf("reports: group by %q: not one of %s", sel.GroupBy, strings.Join(GroupAxisNames(), ", "))
		}
	}
	runs, what, err := selectRuns(all, sel)
	if err != nil {
		return Report{}, err
	}
	outDir, err := filepath.Abs(filepath.Dir(store.Path()))
	if err != nil {
		return Report{}, err
	}
	l := &loader{store: store, outDir: outDir, linked: map[string][]evidence.RunSummary{}, replayVerdicts: map[string]string{}}
	for _, r := range all {
		if r.CorrectsRunID != "" {
			l.linked[r.CorrectsRunID] = append(l.linked[r.CorrectsRunID], r)
		}
	}
	rep := Report{SchemaVersion: ReportSchemaVersion, GeneratedAt: time.Now().UTC(), StorePath: store.Path(),
		Selection: what + filtersText(sel), OutDir: outDir, LinkBase: outDir, StoreFindings: []string{}, Groups: []Group{}}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.RunID
	}
	events, err := store.EventsOfRuns(ctx, ids)
	if err != nil {
		return Report{}, err
	}
	verified := map[string]evidence.RunVerification{}
	rep.Verified = !sel.NoVerify
	if len(ids) > 0 && !sel.NoVerify {
		vs, err := store.VerifyWith(ctx, evidence.VerifyRequest{Runs: ids, Bindings: sel.Bindings})
		if err != nil {
			return Report{}, fmt.Errorf("reports: verify the selected runs: %w", err)
		}
		selected := map[string]bool{}
		for _, id := range ids {
			selected[id] = true
		}
		// The store as a whole: a run erased elsewhere, a broken store-wide chain, damage (VerifyWith
		// of named runs reports only what concerns them).
		whole, err := store.StoreFindings(ctx)
		if err != nil {
			return Report{}, fmt.Errorf("reports: verify the store: %w", err)
		}
		vs = append(vs, whole...)
		seen := map[string]bool{}
		for _, v := range vs {
			if v.RunID != "" && selected[v.RunID] {
				if _, seen := verified[v.RunID]; !seen || v.Status != evidence.VerifyOK {
					verified[v.RunID] = v
				}
				continue
			}
			switch v.Status {
			case evidence.VerifyOK, evidence.VerifyInterrupted, evidence.VerifyUnfinalized:
				continue
			}
			where := "the store"
			if v.RunID != "" {
				where = "run " + v.RunID
			}
			if v.Table != "" {
				where += " (" + v.Table
				if v.Row != "" {
					where += " " + v.Row
				}
				where += ")"
			}
			if f := fmt.Sprintf("%s: %s: %s", where, v.Status, v.Detail); !seen[f] {
				seen[f] = true
				rep.StoreFindings = append(rep.StoreFindings, f)
			}
		}
	}
	groups := map[string]*Invocation{}
	var order []string
	for _, r := range runs {
		if err := ctx.Err(); err != nil {
			return Report{}, err
		}
		c, env, err := l.loadCase(ctx, r, events[r.RunID])
		if err != nil {
			return Report{}, err
		}
		if v, ok := verified[r.RunID]; ok {
			c.Verification, c.VerificationDetail = v.Status, v.Detail
		} else if !sel.NoVerify {
			c.Verification, c.VerificationDetail = evidence.VerifyTampered, "the store's verification did not report this run"
		}
		switch {
		case sel.NoVerify:
			c.TaskFile = c.TaskFile.unverified("the report was built with --no-verify")
		case c.VerificationFailed():
			c.TaskFile = c.TaskFile.unverified("the run's evidence does not verify (" + c.Verification + ")")
		}
		if !keepCase(c, sel) {
			continue
		}
		inv, ok := groups[c.InvocationID]
		if !ok {
			inv = &Invocation{ID: c.InvocationID, StartedAt: c.CreatedAt}
			groups[c.InvocationID] = inv
			order = append(order, c.InvocationID)
		}
		inv.add(c, env)
	}
	for _, id := range order {
		inv := groups[id]
		inv.finish()
		inv.span(all)
		rep.Invocations = append(rep.Invocations, *inv)
	}
	slices.SortStableFunc(rep.Invocations, func(a, b Invocation) int { return b.StartedAt.Compare(a.StartedAt) })
	var cases []Case
	for _, inv := range rep.Invocations {
		cases = append(cases, inv.Cases...)
	}
	rep.Totals = totalsOf(cases)
	rep.Groups = []Group{}
	if sel.GroupBy != "" {
		rep.GroupBy, rep.Groups = axis.Name, groupCases(axis, cases)
	}
	return rep, nil
}

// selectRuns applies sel's run choice (not its filters, which need the loaded case) and says in
// words what was chosen.
func selectRuns(all []evidence.RunSummary, sel Selection) ([]evidence.RunSummary, string, error) {
	if len(sel.RunIDs) > 0 {
		byID := make(map[string]evidence.RunSummary, len(all))
		for _, r := range all {
			byID[r.RunID] = r
		}
		var out []evidence.RunSummary
		seen := map[string]bool{}
		for _, id := range sel.RunIDs {
			r, ok := byID[id]
			if !ok {
				return nil, "", fmt.Errorf("reports: run %s: %w", id, evidence.ErrNoRun)
			}
			if !seen[id] {
				seen[id] = true
				out = append(out, r)
			}
		}
		return out, "runs " + strings.Join(sel.RunIDs, ", "), nil
	}
	if sel.All || !sel.Since.IsZero() {
		if sel.Since.IsZero() {
			return all, "all runs", nil
		}
		var out []evidence.RunSummary
		for _, r := range all {
			if !r.CreatedAt.Before(sel.Since) {
				out = append(out, r)
			}
		}
		return out, "runs created since " + sel.Since.UTC().Format(time.RFC3339), nil
	}
	// Latest: the runs of the last invocation that recorded one; for a store whose runs recorded
	// none (before schema v6), the runs of the last writer session (one process).
	for i := len(all) - 1; i >= 0; i-- {
		if id := all[i].Envelope.InvocationID; id != "" {
			var out []evidence.RunSummary
			for _, r := range all {
				if r.Envelope.InvocationID == id {
					out = append(out, r)
				}
			}
			return out, "the latest invocation (" + id + ")", nil
		}
	}
	if len(all) == 0 {
		return nil, "the latest invocation (the store holds no runs)", nil
	}
	w := all[len(all)-1].WriterID
	var out []evidence.RunSummary
	for _, r := range all {
		if r.WriterID == w {
			out = append(out, r)
		}
	}
	return out, fmt.Sprintf("the latest writer session (%d; these runs recorded no invocation)", w), nil
}

// keepCase applies sel's filters.
func keepCase(c Case, sel Selection) bool {
	match := func(vals []string, v ...string) bool {
		if len(vals) == 0 {
			return true
		}
		for _, x := range v {
			if x != "" && slices.Contains(vals, x) {
				return true
			}
		}
		return false
	}
	name := c.Name
	if !c.NameRecorded {
		name = ""
	}
	state := c.Verdict
	if state == "" {
		state = c.Status
	}
	return match(sel.Formations, c.Formation) && match(sel.Cases, name) && match(sel.Verdicts, state, interruptedIf(c))
}

func interruptedIf(c Case) string {
	if c.Interrupted {
		return evidence.StatusInterrupted
	}
	return ""
}

// add puts c into the invocation and folds its run's facts into the invocation's.
func (inv *Invocation) add(c Case, env Environment) {
	if c.CreatedAt.Before(inv.StartedAt) {
		inv.StartedAt = c.CreatedAt
	}
	p := Provider{Name: c.Provider, BaseURL: c.BaseURL, Model: c.Model, Reference: c.Reference}
	if !slices.Contains(inv.Providers, p) {
		inv.Providers = append(inv.Providers, p)
	}
	inv.Reference = inv.Reference || c.Reference
	if !slices.Contains(inv.PolicyDigests, c.PolicyDigest) {
		inv.PolicyDigests = append(inv.PolicyDigests, c.PolicyDigest)
	}
	if !slices.Contains(inv.Modes, c.Mode) {
		inv.Modes = append(inv.Modes, c.Mode)
	}
	// One line per fingerprint and preimage state: a run without its preimage, or whose preimage
	// cannot be read, is never folded into a line that says the fingerprint re-derives.
	i := slices.IndexFunc(inv.Environments, func(e Environment) bool {
		return e.Fingerprint == env.Fingerprint && e.Recorded == env.Recorded && (e.PreimageUnreadable == "") == (env.PreimageUnreadable == "")
	})
	switch {
	case i < 0:
		env.Runs = 1
		inv.Environments = append(inv.Environments, env)
	default:
		e := &inv.Environments[i]
		e.Runs++
		if env.Matches != nil && (e.Matches == nil || !*env.Matches) {
			e.Matches = env.Matches // one preimage that does not re-derive decides
			if !e.Recorded {
				runs := e.Runs
				*e = env
				e.Runs = runs
			}
		}
	}
	inv.Cases = append(inv.Cases, c)
}

// finish orders the cases failures first and fixes the end time and totals.
func (inv *Invocation) finish() {
	slices.SortStableFunc(inv.Cases, func(a, b Case) int {
		if d := cmp.Compare(rank(a), rank(b)); d != 0 {
			return d
		}
		return a.CreatedAt.Compare(b.CreatedAt)
	})
	var end *time.Time
	inInvocation := map[string]bool{}
	for _, c := range inv.Cases {
		inInvocation[c.RunID] = true
	}
	for _, c := range inv.Cases {
		if c.Lineage.CorrectsRunID != "" && inInvocation[c.Lineage.CorrectsRunID] {
			continue // a correction made later by assay reconcile (span)
		}
		if c.FinalizedAt == nil {
			end = nil
			break
		}
		if end == nil || c.FinalizedAt.After(*end) {
			t := *c.FinalizedAt
			end = &t
		}
	}
	inv.EndedAt = end
	if end != nil {
		s := end.Sub(inv.StartedAt).Seconds()
		inv.WallSeconds = &s
	}
	inv.Totals = totalsOf(inv.Cases)
}

// span sets the invocation's start, end and wall time from every run of the store it holds (all),
// not only the cases a filter kept: a report of one case of an invocation shows when the
// invocation ran. Runs without an invocation id ("") keep the span of their selected cases.
func (inv *Invocation) span(all []evidence.RunSummary) {
	if inv.ID == "" {
		return
	}
	var end *time.Time
	open := false
	invocationOf := map[string]string{}
	for _, r := range all {
		invocationOf[r.RunID] = r.Envelope.InvocationID
	}
	for _, r := range all {
		if r.Envelope.InvocationID != inv.ID {
			continue
		}
		if r.CorrectsRunID != "" && invocationOf[r.CorrectsRunID] == inv.ID {
			// A correction (assay reconcile) keeps the envelope, invocation id included, of the
			// run it corrects, but was made later by another command: it is not part of the
			// invocation's span. (A resume is an invocation of its own.)
			continue
		}
		if r.CreatedAt.Before(inv.StartedAt) {
			inv.StartedAt = r.CreatedAt
		}
		switch {
		case r.FinalizedAt == nil:
			open = true
		case end == nil || r.FinalizedAt.After(*end):
			t := *r.FinalizedAt
			end = &t
		}
	}
	if open || end == nil {
		inv.EndedAt, inv.WallSeconds = nil, nil
		return
	}
	inv.EndedAt = end
	w := end.Sub(inv.StartedAt).Seconds()
	inv.WallSeconds = &w
}

// filtersText is sel's filters in words ("; kept: case parallel+vote; verdict rejected"), "" when
// there are none: a filtered report says it is one.
func filtersText(sel Selection) string {
	var parts []string
	for _, f := range []struct {
		name string
		vals []string
	}{{"formation", sel.Formations}, {"case", sel.Cases}, {"verdict", sel.Verdicts}} {
		if len(f.vals) > 0 {
			parts = append(parts, f.name+" "+strings.Join(f.vals, " or "))
		}
	}
	if len(parts) == 0 {
		return ""
	}
	return "; kept: " + strings.Join(parts, "; ")
}

// rank orders cases failures first: evidence that does not verify, rejected, interrupted,
// non_certifiable, open, accepted.
func rank(c Case) int {
	switch {
	case c.VerificationFailed():
		return 0
	case c.Verdict == evidence.VerdictRejected && !c.Interrupted:
		return 1
	case c.Interrupted:
		return 2
	case c.Verdict == evidence.VerdictNonCertifiable:
		return 3
	case c.Verdict == "":
		return 4
	}
	return 5
}

// totalsOf counts cases by verdict (status when none) and sums tokens by source and wall time.
func totalsOf(cases []Case) Totals {
	t := Totals{ByVerdict: map[string]int{}}
	tokens := map[string]*SourceTokens{}
	readings := map[string]int{}
	var sources []string
	for _, s := range usageSources {
		tokens[s] = &SourceTokens{Source: s, Known: true}
		sources = append(sources, s)
	}
	for _, c := range cases {
		t.Cases++
		key := c.Verdict
		if key == "" || c.Interrupted {
			key = c.Status
			if c.Interrupted {
				key = evidence.StatusInterrupted
			}
		}
		if c.VerificationFailed() {
			key = DoesNotVerify
		}
		t.ByVerdict[key]++
		if c.WallSeconds != nil {
			t.WallSeconds += *c.WallSeconds
		} else {
			t.UnknownWall++
		}
		for _, m := range c.Members {
			for _, s := range sources {
				i := slices.IndexFunc(m.Usage, func(u Usage) bool { return u.Source == s })
				if i < 0 || m.Usage[i].TotalTokens == nil {
					tokens[s].Known = false
					continue
				}
				tokens[s].Tokens += *m.Usage[i].TotalTokens
				readings[s]++
			}
		}
	}
	for _, s := range sources {
		if readings[s] == 0 {
			tokens[s].Known = false // no reading at all is unknown, never a total of 0
		}
		t.Tokens = append(t.Tokens, *tokens[s])
	}
	return t
}

// usageSources are the three readings of a member's tokens (DESIGN.md), in the order reports show them.
var usageSources = []string{"store", "wire", "gateway"}

// Rebase returns r with every link relative to dir (the directory a report file is written in)
// instead of r.LinkBase, so links resolve from the file's own location.
// Errors: a link that cannot be made relative to dir (another volume).
func (r Report) Rebase(dir string) (Report, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Report{}, err
	}
	out := r
	out.Invocations = make([]Invocation, len(r.Invocations))
	for i, inv := range r.Invocations {
		inv.Cases = slices.Clone(inv.Cases)
		for j := range inv.Cases {
			c := &inv.Cases[j]
			links := make([]Link, len(c.Links))
			for k, l := range c.Links {
				rel, err := filepath.Rel(abs, filepath.Join(r.LinkBase, filepath.FromSlash(l.Path)))
				if err != nil {
					return Report{}, fmt.Errorf("reports: link %s from %s: %w", l.Path, abs, err)
				}
				links[k] = Link{Label: l.Label, Path: filepath.ToSlash(rel)}
			}
			c.Links = links
		}
		out.Invocations[i] = inv
	}
	out.LinkBase = abs
	return out, nil
}

// Package reports renders audit reports from the evidence store: what a person reads, built only
// from what the store holds (never from in-memory claims of the run that produced it). Load builds
// the Report model; each format renders that one value.
package reports

import (
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/assay-audit/assay/internal/atomicfile"
)

// referenceBanner labels results obtained with the embedded reference provider.
const referenceBanner = "> **Reference results.** These runs used the embedded reference provider (`assay-reference-1`), " +
	"a deterministic server that is not a language model: it writes the task file's reference solution back " +
	"(docs/tasks.md). They show that assay's pipeline and checks work " +
	"end to end; they say nothing about any model's ability.\n\n"

// Markdown writes r as GitHub-flavoured Markdown: totals, then per invocation its provider,
// environment, policy and a table of its cases (failures first), then every case with its checks
// (full detail and evidence), members' usage by source, timings by phase, approvals,
// reconciliations, lineage, full hashes and links to its evidence files.
func Markdown(w io.Writer, r Report) error {
	var b strings.Builder
	b.WriteString("# assay report\n\n")
	for _, inv := range r.Invocations {
		if inv.Reference {
			b.WriteString(referenceBanner)
			break
		}
	}
	fmt.Fprintf(&b, "- selection: %s\n- evidence store: `%s`\n- generated: %s\n", r.Selection, r.StorePath, stamp(r.GeneratedAt))
	if len(r.StoreFindings) > 0 {
		b.WriteString("- evidence store: **does not verify** — whatever the runs below say, the store they were read from was altered:\n")
		for _, f := range r.StoreFindings {
			b.WriteString("  - " + cell(f) + "\n")
		}
	}
	if r.Verified {
		b.WriteString("- evidence: every run's hash chain, terminal hash, envelope, artifacts and bindings recomputed when this report was built (as `assay verify` does)\n")
	} else {
		b.WriteString("- evidence: **not verified** (`--no-verify`): the verdicts below are as recorded; `assay verify` recomputes them\n")
	}
	writeTotals(&b, "- ", r.Totals)
	if len(r.Invocations) == 0 {
		b.WriteString("\nNo runs match the selection.\n")
	}
	writeGroups(&b, r)
	for _, inv := range r.Invocations {
		writeInvocation(&b, inv)
	}
	b.WriteString(glossary)
	_, err := io.WriteString(w, b.String())
	return err
}

func writeTotals(b *strings.Builder, prefix string, t Totals) {
	fmt.Fprintf(b, "%scases: %d (%s)\n", prefix, t.Cases, byVerdict(t.ByVerdict))
	var toks []string
	for _, s := range t.Tokens {
		toks = append(toks, s.Source+" "+tokenTotal(s))
	}
	fmt.Fprintf(b, "%stokens: %s\n", prefix, strings.Join(toks, ", "))
	wall := fmt.Sprintf("%.1f s summed over cases", t.WallSeconds)
	if t.UnknownWall > 0 {
		wall += fmt.Sprintf(" (%d not finalized: unknown)", t.UnknownWall)
	}
	fmt.Fprintf(b, "%swall time: %s\n", prefix, wall)
}

// verdictOrder lists verdicts and statuses failures first, as reports show them.
var verdictOrder = []string{"rejected", "interrupted", "non_certifiable", "open", "accepted"}

func byVerdict(m map[string]int) string {
	var parts []string
	for _, v := range verdictOrder {
		if m[v] > 0 {
			parts = append(parts, fmt.Sprintf("%s %d", v, m[v]))
		}
	}
	for v, n := range m {
		if !contains(verdictOrder, v) {
			parts = append(parts, fmt.Sprintf("%s %d", v, n))
		}
	}
	if len(parts) == 0 {
		return "none"
	}
	return strings.Join(parts, ", ")
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// tokenTotal renders a source's total; a partly unknown total is a lower bound, never a figure.
func tokenTotal(s SourceTokens) string {
	if s.Known {
		return fmt.Sprint(s.Tokens)
	}
	if s.Tokens == 0 {
		return "unknown"
	}
	return fmt.Sprintf("at least %d (some unknown)", s.Tokens)
}

func writeInvocation(b *strings.Builder, inv Invocation) {
	if inv.ID == "" {
		b.WriteString("\n## Runs without a recorded invocation\n\n")
	} else {
		fmt.Fprintf(b, "\n## Invocation `%s`\n\n", inv.ID)
	}
	if inv.Reference {
		b.WriteString("Results of the embedded reference provider: reference results, not a language model's.\n\n")
	}
	end, wall := NotRecorded+" (a run is not finalized)", "unknown"
	if inv.EndedAt != nil {
		end = stamp(*inv.EndedAt)
	}
	if inv.WallSeconds != nil {
		wall = secs(inv.WallSeconds)
	}
	fmt.Fprintf(b, "- started: %s; ended: %s; wall time: %s s\n", stamp(inv.StartedAt), end, wall)
	for _, p := range inv.Providers {
		ref := ""
		if p.Reference {
			ref = " (embedded reference provider, not a language model)"
		}
		fmt.Fprintf(b, "- provider: %s%s; base URL: %s; model: `%s`\n", p.Name, ref, orNone(p.BaseURL), p.Model)
	}
	for _, e := range inv.Environments {
		writeEnvironment(b, e)
	}
	var pols []string
	for _, p := range inv.PolicyDigests {
		if p == "" {
			p = "none"
		} else {
			p = "`" + p + "`"
		}
		pols = append(pols, p)
	}
	fmt.Fprintf(b, "- policy digest: %s\n- mode: %s\n", strings.Join(pols, ", "), strings.Join(inv.Modes, ", "))
	writeTotals(b, "- ", inv.Totals)
	b.WriteString("\n| case | formation | profile | language | task | provider | model | repeat | run | status | verdict | wall (s) | wire tokens |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, c := range inv.Cases {
		status := c.Status
		if c.Interrupted {
			status = "interrupted"
		}
		fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | `%s` | %s | `%s` | %s | **%s** | %s | %s |\n", cell(c.Name), c.Formation, c.Profile, c.Language,
			cell(taskCell(c)), cell(c.Provider), cell(c.Model), repeatText(c.Repeat), c.RunID, status, verdictCell(c), secs(c.WallSeconds), memberTokens(c, "wire"))
	}
	for _, c := range inv.Cases {
		writeCase(b, c)
	}
}

func writeEnvironment(b *strings.Builder, e Environment) {
	fmt.Fprintf(b, "- environment fingerprint: `%s` (%d runs)", e.Fingerprint, e.Runs)
	switch {
	case !e.Recorded:
		b.WriteString(": preimage not recorded with these runs (runs before schema v6 store none; a replay run keeps the fingerprint of the run it replays): what it covers cannot be shown\n")
		return
	case e.PreimageUnreadable != "":
		fmt.Fprintf(b, ": **its recorded preimage (environment.json) cannot be read** (%s): whether the fingerprint re-derives, and what it covers, is unknown\n", e.PreimageUnreadable)
		return
	case e.Matches != nil && !*e.Matches:
		b.WriteString(": **does not match** its recorded preimage (SHA-256 of environment.json differs)\n")
	default:
		b.WriteString(": matches its recorded preimage (re-derived)\n")
	}
	commit := orUnknown(e.Commit)
	if e.Modified != nil && *e.Modified {
		commit += " (modified work tree)"
	}
	fmt.Fprintf(b, "  - assay %s, commit %s, commit time %s; %s %s/%s; fingerprint version %d\n", orUnknown(e.AssayVersion),
		commit, orUnknown(e.CommitTime), orUnknown(e.GoVersion), e.GOOS, e.GOARCH, e.FingerprintVersion)
}

func writeCase(b *strings.Builder, c Case) {
	fmt.Fprintf(b, "\n### %s — %s (run `%s`)\n\n", c.Name, verdictWord(c), c.RunID)
	fmt.Fprintf(b, "Verdict: **%s**", verdictCell(c))
	if len(c.Reasons) > 0 {
		b.WriteString(" — " + cell(strings.Join(c.Reasons, "; ")))
	}
	b.WriteString("\n\n")
	if c.VerificationFailed() {
		fmt.Fprintf(b, "**The store's recomputation of this run's evidence failed (%s): its recorded verdict is not evidence of "+
			"anything.** %s\n\n", c.Verification, cell(c.VerificationDetail))
	}
	if c.Reference {
		b.WriteString("Reference result (embedded reference provider, not a language model).\n\n")
	}
	fin := NotRecorded + " (not finalized)"
	if c.FinalizedAt != nil {
		fin = stamp(*c.FinalizedAt)
	}
	fmt.Fprintf(b, "- formation %s, profile %s, language %s, kind %s, mode %s, tenant %s, status %s\n", c.Formation, c.Profile,
		c.Language, c.Kind, c.Mode, c.Tenant, c.Status)
	fmt.Fprintf(b, "- provider %s, model `%s`, task %s, repeat %s\n", c.Provider, c.Model, orNotRecorded(c.Task), repeatText(c.Repeat))
	writeTaskFile(b, c.TaskFile)
	fmt.Fprintf(b, "- created %s, finalized %s, wall time %s s\n", stamp(c.CreatedAt), fin, secs(c.WallSeconds))
	fmt.Fprintf(b, "- terminal hash: `%s` (version %d, %d events)\n", orNone(c.TerminalHash), c.TerminalVersion, c.EventCount)
	fmt.Fprintf(b, "- manifest digest: `%s`\n- envelope digest: `%s`\n- policy digest: %s\n", c.ManifestDigest, c.EnvelopeDigest,
		code(c.PolicyDigest))
	fmt.Fprintf(b, "- environment fingerprint: `%s`\n- invocation: %s\n", c.EnvironmentFingerprint, code(c.InvocationID))
	writeLineage(b, c)
	b.WriteString("\n| phase | seconds | how |\n| --- | --- | --- |\n")
	for _, p := range c.Phases {
		fmt.Fprintf(b, "| %s | %s | %s |\n", p.Name, secs(p.Seconds), cell(p.Note))
	}
	if len(c.Checks) > 0 {
		b.WriteString("\n| check | required | status | detail |\n| --- | --- | --- | --- |\n")
		for _, ch := range c.Checks {
			fmt.Fprintf(b, "| %s | %t | %s | %s |\n", ch.Name, ch.Required, ch.Status, cell(ch.Detail))
		}
		for _, ch := range c.Checks {
			if ch.Evidence != "" {
				fmt.Fprintf(b, "\n<details><summary>evidence of check %s</summary>\n\n%s\n\n</details>\n", cell(ch.Name), fenced(ch.Evidence))
			}
		}
	} else {
		b.WriteString("\nNo checks recorded.\n")
	}
	if len(c.Members) > 0 {
		b.WriteString("\n| member | session | source | state | requests | prompt | completion | total | usage verdict |\n")
		b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
		for _, m := range c.Members {
			verdict := orNone(m.Conservation)
			if len(m.Usage) == 0 {
				fmt.Fprintf(b, "| %s | %s | — | no usage recorded | unknown | unknown | unknown | unknown | %s |\n", m.ID, code(m.SessionID), verdict)
			}
			for _, u := range m.Usage {
				fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %s | %s | %s | %s |\n", m.ID, code(m.SessionID), u.Source, u.State,
					count(u.Requests), count(u.PromptTokens), count(u.CompletionTokens), count(u.TotalTokens), verdict)
			}
		}
		for _, m := range c.Members {
			if m.Conservation != "" && m.Conservation != "conserved" {
				fmt.Fprintf(b, "\n- usage of %s: **%s** %s\n", m.ID, m.Conservation, cell(m.ConservationDetail))
			}
		}
	}
	if len(c.Approvals) > 0 {
		b.WriteString("\n| approval: approver | tool | call | payload SHA-256 | time |\n| --- | --- | --- | --- | --- |\n")
		for _, a := range c.Approvals {
			at := NotRecorded
			if a.At != nil {
				at = stamp(*a.At)
			}
			fmt.Fprintf(b, "| %s | %s | `%s` | `%s` | %s |\n", cell(orUnknown(a.Approver)), cell(a.Tool), a.CallID, a.PayloadSHA256, at)
		}
	}
	for _, rc := range c.Reconciliations {
		how := "unreconciled (may have committed)"
		if rc.Source != "" {
			how = fmt.Sprintf("decided %s by %s in run `%s`", rc.Outcome, rc.Source, rc.RecordedInRunID)
			if rc.Note != "" {
				how += ": " + rc.Note
			}
		}
		fmt.Fprintf(b, "- effect `%s` (%s): %s\n", rc.IdempotencyKey, rc.Tool, how)
	}
	if len(c.Links) > 0 {
		b.WriteString("\nEvidence files:\n\n")
		for _, l := range c.Links {
			fmt.Fprintf(b, "- [%s](%s)\n", l.Label, l.Path)
		}
	}
}

// taskCell is a case's task as its row shows it: the envelope's task, marked when the stored task
// file does not back it.
func taskCell(c Case) string {
	t := orNotRecorded(c.Task)
	if c.TaskFile.Status != "" && !c.TaskFile.Verified() && c.TaskFile.Status != TaskFileNoManifest && c.TaskFile.Status != TaskFileNotApplicable {
		t += " (task file " + taskFileStatusText(c.TaskFile.Status) + ")"
	}
	return t
}

// taskFileStatusText is a TaskFile status in words.
func taskFileStatusText(s string) string {
	switch s {
	case TaskFileMatches:
		return "matches"
	case TaskFileMismatch:
		return "does not match"
	case TaskFileMissing:
		return "not stored"
	case TaskFileNotBound:
		return "not bound"
	case TaskFileManifestMismatch:
		return "manifest does not match"
	case TaskFileNoManifest:
		return "not recorded with this run"
	case TaskFileNotApplicable:
		return "not applicable (no task executed)"
	case TaskFileUnreadable:
		return "unreadable"
	case TaskFileUnverified:
		return "not verified"
	}
	return NotRecorded
}

// writeTaskFile writes a case's task file line: the full SHA-256 the manifest binds and what the
// stored bytes say, what the checks said of it, and whether the reference solution was used.
func writeTaskFile(b *strings.Builder, t TaskFile) {
	switch t.Status {
	case "":
		return
	case TaskFileMatches:
		fmt.Fprintf(b, "- task file: %s, SHA-256 `%s` (re-derived: %s)\n", cell(t.Name), t.SHA256, cell(t.Detail))
	case TaskFileMismatch, TaskFileMissing:
		fmt.Fprintf(b, "- task file: %s, SHA-256 `%s` as the manifest binds it — **%s**: %s\n", cell(t.Name), t.SHA256,
			taskFileStatusText(t.Status), cell(t.Detail))
	default:
		name := ""
		if t.Name != "" {
			name = " " + cell(t.Name)
			if t.SHA256 != "" {
				name += ", SHA-256 `" + t.SHA256 + "`"
			}
		}
		fmt.Fprintf(b, "- task file%s: **%s** — %s\n", name, taskFileStatusText(t.Status), cell(t.Detail))
	}
	for _, f := range t.CheckFindings {
		fmt.Fprintf(b, "  - %s\n", cell(f))
	}
	if t.ReferenceSolution != nil {
		if *t.ReferenceSolution {
			b.WriteString("- reference solution: used — the manifest records that the embedded reference provider answered with the task file's reference solution (not a model's work)\n")
		} else {
			b.WriteString("- reference solution: not used — the manifest records a provider other than the embedded reference provider\n")
		}
	}
}

func writeLineage(b *strings.Builder, c Case) {
	l := c.Lineage
	if l.ResumesRunID != "" {
		cp := ""
		if l.CheckpointSeq != nil {
			cp = fmt.Sprintf(" from its checkpoint after event %d", *l.CheckpointSeq)
		}
		fmt.Fprintf(b, "- resumes run `%s`%s\n", l.ResumesRunID, cp)
	} else if l.CorrectsRunID != "" && c.Replay == nil {
		fmt.Fprintf(b, "- corrects run `%s`\n", l.CorrectsRunID)
	}
	if l.ResumedByRunID != "" {
		fmt.Fprintf(b, "- resumed by run `%s`\n", l.ResumedByRunID)
	}
	for _, id := range l.CorrectedBy {
		fmt.Fprintf(b, "- corrected by run `%s`\n", id)
	}
	for _, rp := range l.ReplayedBy {
		fmt.Fprintf(b, "- replayed by run `%s`: %s\n", rp.RunID, orNone(rp.Verdict))
	}
	if c.Replay != nil {
		fmt.Fprintf(b, "- replays run `%s` under tolerance %s: replay verdict **%s**", c.Replay.ReplaysRunID, orNone(c.Replay.Tolerance),
			orNone(c.Replay.Verdict))
		if c.Replay.Reason != "" {
			b.WriteString(" — " + c.Replay.Reason)
		}
		b.WriteString("\n")
	}
}

// glossary explains the report's terms to a reader who has not read the code (DESIGN.md vocabulary).
const glossary = `
## Terms

- **verdict**: ` + "`accepted`" + ` only when every required check passed; ` + "`rejected`" + ` names the checks that did not;
  ` + "`non_certifiable`" + ` when the run's mode or evidence cannot certify anything; ` + "`interrupted`" + ` when its
  writer ended before finalizing it.
- **case**: the catalog case (` + "`parallel+vote`" + `, ` + "`sequential+remote`" + ` ...); runs recorded before the store kept
  it say "` + CaseNotRecorded + `".
- **envelope**: what the run was bound to before it executed — tenant, mode (` + "`live`" + `, ` + "`dry_run`" + `,
  ` + "`observe`" + `), the manifest digest (SHA-256 of the case definition: members, tasks, deliverables, checks,
  model), the policy digest and the environment fingerprint (SHA-256 of the recorded environment.json: assay
  version and commit, Go version, OS, architecture).
- **events / terminal hash**: each run's events are hash-chained (SHA-256 over RFC 8785 canonical JSON);
  the terminal hash seals the chain, artifacts, checks and verdict. ` + "`assay verify`" + ` recomputes both.
- **usage sources**: ` + "`store`" + ` what the runtime accumulated, ` + "`wire`" + ` a fresh parse of the raw response bytes,
  ` + "`gateway`" + ` the observing gateway's records. ` + "`conserved`" + ` means all three reported and agree;
  ` + "`unknown`" + ` means some source had no figure — never counted as 0.
- **phases**: timings derived from the recorded events' timestamps (team, checks, finalize) and from the
  durations the tests and oracle checks recorded; "` + NotRecorded + `" where the evidence does not give one.
`

// WriteFileAtomic writes data to path, mode 0644 (a report is meant to be read and handed on),
// through internal/atomicfile (a temporary file in the same directory, fsync, rename, directory
// fsync), so a reader never sees a half-written report. Errors are *fs.PathError naming path.
func WriteFileAtomic(path string, data []byte) error {
	return atomicfile.Write(path, data, 0o644)
}

// verdictCell is a case's recorded verdict, marked when its evidence does not verify.
func verdictCell(c Case) string {
	if c.VerificationFailed() {
		return orNotFinalized(c.Verdict) + " (evidence does not verify: " + c.Verification + ")"
	}
	return orNotFinalized(c.Verdict)
}

// verdictWord is a case's verdict as headings show it: a sealed interrupted run is "rejected
// (interrupted)", an open one "interrupted" or "not finalized".
func verdictWord(c Case) string {
	if c.VerificationFailed() {
		return fmt.Sprintf("%s — evidence does not verify (%s)", orNotFinalized(c.Verdict), c.Verification)
	}
	switch {
	case c.Interrupted && c.Verdict != "":
		return c.Verdict + " (interrupted)"
	case c.Interrupted:
		return "interrupted"
	}
	return orNotFinalized(c.Verdict)
}

func orNotFinalized(v string) string {
	if v == "" {
		return "not finalized"
	}
	return v
}

// memberTokens sums the members' total tokens from one source; unknown when any is.
func memberTokens(c Case, source string) string {
	var n int64
	for _, m := range c.Members {
		found := false
		for _, u := range m.Usage {
			if u.Source == source && u.TotalTokens != nil {
				n += *u.TotalTokens
				found = true
			}
		}
		if !found {
			return "unknown"
		}
	}
	if len(c.Members) == 0 {
		return "unknown"
	}
	return fmt.Sprint(n)
}

// count renders a count; nil is "unknown", never 0.
func count(v *int64) string {
	if v == nil {
		return "unknown"
	}
	return fmt.Sprint(*v)
}

func secs(v *float64) string {
	if v == nil {
		return NotRecorded
	}
	return fmt.Sprintf("%.3f", *v)
}

func stamp(t time.Time) string { return t.UTC().Format("2006-01-02 15:04:05Z") }

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

func orUnknown(s string) string {
	if s == "" {
		return "unknown"
	}
	return s
}

func code(s string) string {
	if s == "" {
		return "none"
	}
	return "`" + s + "`"
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "<", "&lt;") // recorded text (a model's reply, a check's detail) never opens an HTML tag
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

// fenced is s in a Markdown code fence longer than any run of backticks in s, so recorded text
// cannot close the fence and continue as Markdown or HTML (CommonMark 0.31, 4.5 fenced code blocks).
func fenced(s string) string {
	longest, run := 0, 0
	for _, r := range s {
		if r == '`' {
			run++
			longest = max(longest, run)
		} else {
			run = 0
		}
	}
	fence := strings.Repeat("`", max(3, longest+1))
	return fence + "\n" + s + "\n" + fence
}

// repeatText is a repeat index as reports show it: "#N", or "—" for a run that is not a repeat run.
func repeatText(n int) string {
	if n == 0 {
		return "—"
	}
	return fmt.Sprintf("#%d", n)
}

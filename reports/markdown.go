// Package reports renders audit reports from the evidence store: what a person reads, built only
// from what the store holds (never from in-memory claims of the run that produced it).
package reports

import (
	"fmt"
	"io"
	"strings"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/atomicfile"
)

// MatrixReport is the input of a matrix report.
type MatrixReport struct {
	// Provider describes where responses came from.
	Provider string
	// Model is the model id requests named.
	Model string
	// Reference is true when results were obtained with the embedded reference provider; the report
	// then says they are reference results, not a language model's.
	Reference bool
	// Runs are the finalized runs of the matrix, read back from the evidence store.
	Runs []evidence.RunSummary
	// StorePath is the evidence store the runs were read from.
	StorePath string
	// CasesDir is where each case's working directories are, "" to omit.
	CasesDir string
}

// Markdown writes the matrix report as GitHub-flavoured Markdown.
func Markdown(w io.Writer, r MatrixReport) error {
	var b strings.Builder
	b.WriteString("# assay matrix report\n\n")
	if r.Reference {
		b.WriteString("> **Reference results.** These runs used the embedded reference provider (`assay-reference-1`), " +
			"a deterministic server that is not a language model. They show that assay's pipeline and checks work " +
			"end to end; they say nothing about any model's ability.\n\n")
	}
	fmt.Fprintf(&b, "- provider: %s\n- model: `%s`\n- evidence store: `%s`\n", r.Provider, r.Model, r.StorePath)
	accepted := 0
	for _, run := range r.Runs {
		if run.Verdict != nil && run.Verdict.Verdict == "accepted" {
			accepted++
		}
	}
	fmt.Fprintf(&b, "- cases: %d, accepted: %d\n", len(r.Runs), accepted)
	if r.CasesDir != "" {
		fmt.Fprintf(&b, "- each case's working directories: `%s/<run>/`\n", r.CasesDir)
	}
	b.WriteString("\nThis report covers the runs of one `assay matrix run`; the evidence store keeps every run " +
		"(`assay sql \"SELECT * FROM runs\"`).\n\n")

	b.WriteString("| run | started (UTC) | formation | profile | language | status | verdict | events | terminal hash |\n")
	b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- | --- |\n")
	for _, run := range r.Runs {
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s | %s | **%s** | %d | `%s` |\n", run.RunID,
			run.CreatedAt.UTC().Format("2006-01-02 15:04:05"), run.Envelope.Formation,
			run.Envelope.TaskProfile, run.Envelope.Language, run.Status, verdictOf(run), run.EventCount, short(run.TerminalHash))
	}
	for _, run := range r.Runs {
		fmt.Fprintf(&b, "\n## %s — %s\n\n", run.RunID, run.Envelope.Formation)
		fmt.Fprintf(&b, "Verdict: **%s**", verdictOf(run))
		if run.Verdict != nil && len(run.Verdict.Reasons) > 0 {
			b.WriteString(" — " + strings.Join(run.Verdict.Reasons, "; "))
		}
		fmt.Fprintf(&b, "\n\nEnvelope: tenant `%s`, mode `%s`, manifest `%s`, environment `%s`.\n\n",
			run.Envelope.Tenant, run.Envelope.Mode, short(run.Envelope.ManifestDigest), short(run.Envelope.EnvironmentFingerprint))
		b.WriteString("| check | required | status | detail |\n| --- | --- | --- | --- |\n")
		for _, c := range run.Checks {
			fmt.Fprintf(&b, "| %s | %t | %s | %s |\n", c.Name, c.Required, c.Status, cell(c.Detail))
		}
		if len(run.Usage) > 0 {
			b.WriteString("\n| member | session | source | state | requests | prompt | completion | total |\n")
			b.WriteString("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
			for _, u := range run.Usage {
				fmt.Fprintf(&b, "| %s | `%s` | %s | %s | %d | %s | %s | %s |\n", u.MemberID, u.SessionID, u.Source, u.State,
					u.Requests, count(u.PromptTokens), count(u.CompletionTokens), count(u.TotalTokens))
			}
		}
		if len(run.UsageVerdicts) > 0 {
			b.WriteString("\n")
			for _, v := range run.UsageVerdicts {
				fmt.Fprintf(&b, "- usage of `%s`: **%s** %s\n", v.SessionID, v.Verdict, v.Detail)
			}
		}
	}
	b.WriteString(glossary)
	_, err := io.WriteString(w, b.String())
	return err
}

// glossary explains the report's terms to a reader who has not read the code (DESIGN.md vocabulary).
const glossary = `
## Terms

- **verdict**: ` + "`accepted`" + ` only when every required check passed; ` + "`rejected`" + ` names the checks that did not;
  ` + "`non_certifiable`" + ` when the run's mode or evidence cannot certify anything.
- **envelope**: what the run was bound to before it executed — tenant, mode (` + "`live`" + `, ` + "`dry_run`" + `,
  ` + "`observe`" + `), the manifest digest (SHA-256 of the case definition: members, tasks, deliverables, checks,
  model) and the environment fingerprint (SHA-256 of Go version, OS, architecture and assay version).
- **events / terminal hash**: each run's events are hash-chained (SHA-256 over RFC 8785 canonical JSON);
  the terminal hash seals the chain, artifacts, checks and verdict. ` + "`assay verify`" + ` recomputes both.
- **usage sources**: ` + "`wire`" + ` is what the observing gateway parsed from each raw response, ` + "`store`" + ` what the
  runtime's own client accumulated, ` + "`gateway`" + ` what the gateway's usage endpoint reports. ` + "`conserved`" + `
  means all three reported and agree; ` + "`unknown`" + ` means some source had no figure — never counted as 0.
- **required**: a required check must pass for the case to be accepted.
`

// WriteFileAtomic writes data to path, mode 0600, through internal/atomicfile (a temporary file in
// the same directory, fsync, rename, directory fsync), so a reader never sees a half-written report.
// Errors are *fs.PathError naming path.
func WriteFileAtomic(path string, data []byte) error {
	return atomicfile.Write(path, data, 0o600)
}

func verdictOf(r evidence.RunSummary) string {
	if r.Verdict == nil {
		return "not finalized"
	}
	return r.Verdict.Verdict
}

// count renders a token count; NULL is "unknown", never 0.
func count(v *int64) string {
	if v == nil {
		return "unknown"
	}
	return fmt.Sprint(*v)
}

func short(h string) string {
	if len(h) > 16 {
		return h[:16] + "…"
	}
	return h
}

func cell(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

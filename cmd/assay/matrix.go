package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/harness/replay/tolerance"
	"github.com/assay-audit/assay/reports"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// MatrixRunOptions are the parsed flags of `assay matrix run`.
type MatrixRunOptions struct {
	IO         IOStreams
	Harness    harness.Options
	Formations string
	APIKeyEnv  string
	Faults     []string
	Format     string
	// ModelAliases are --model-alias values, REQUESTED=ANSWERED.
	ModelAliases []string
}

// NewCmdMatrix builds `assay matrix` and its `run` subcommand. runF replaces runMatrixRun in tests.
func NewCmdMatrix(io IOStreams, runF func(context.Context, *MatrixRunOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Run formation matrices against a provider",
	}
	opts := &MatrixRunOptions{IO: io}
	run := &cobra.Command{
		Use:   "run",
		Short: "Run every selected formation on a task profile and accept or reject each case from evidence",
		Long: `Run each selected case of the catalog — one per formation plus the ensemble modes parallel+vote,
parallel+judge and parallel+synthesizer, and sequential+remote, whose members publish to a remote effect
service with remote_put; 16 in all — against an OpenAI-compatible provider (by default
the embedded reference provider on 127.0.0.1, not a language model) through the observing gateway,
then check each case independently of what any member said: declared files exist, the members' tests
pass under a bounded runner (go test, or pytest for --language python), the finite-domain oracle passes
with the artifact unchanged, member outcomes succeeded, the formation's own evidence is in the trace
(critic verdicts, consensus, the router's single selection, judge and ensemble decisions, handoffs),
session ids are distinct and match the wire, routing matches, no tool call's effect is left unknown
and every remote_put has its committed receipt in <out>/reference-effects.db, and token usage is
conserved across wire, store and gateway. Every case is recorded and finalized in <out>/evidence.duckdb, accepted or
rejected (a rejected case names every failed check and is never re-run); the gateway's records go to
<out>/gateway-usage.db; <out>/report.md is the readable report. Progress goes to stderr.

Every tool call of every member passes the execution boundary (docs/safety.md): --policy decides it
(allow, deny, or ask an approver), --approvals preloads exact grants for calls policy asks about (a
call no grant covers fails its member as "paused for approval"; nothing is dispatched), and the
tool-call budgets are reserved before each dispatch. --member-tokens and --team-tokens limit provider
tokens: before each provider request the member reserves on the same budget, and the request is
refused (the member fails naming the budget; the case is rejected) once the tokens so far reach a
limit, or when a limit is set and an earlier response reported no usage — unknown usage is never
counted as zero. --mode dry_run simulates every tool that is not
readonly and --mode observe records asks without enforcing them; both runs are finalized
non_certifiable, never accepted, and say so in the table and the report. The provider API key and the
values of secret-looking environment variables (…KEY, …TOKEN, …SECRET, …PASSWORD, …CREDENTIALS) are
masked in every event, artifact, check detail, report and progress line.

Profiles: standard (two files per implementing member: the function and its test) and single-file
(one test file that also holds the function). Languages: go and python.

Exit status: 0 when every case is accepted, 1 when any case is not, 2 on bad input.`,
		Example: `  assay matrix run
  assay matrix run --formations all --concurrency 2
  assay matrix run --formations reflection,parallel+vote --profile single-file --language python
  assay matrix run --formations parallel --format json
  assay matrix run --policy policy.yaml --approvals assay-out/approvals.json
  assay matrix run --mode dry_run
  assay matrix run --member-tokens 20000 --team-tokens 100000
  OPENAI_API_KEY=... assay matrix run --base-url https://api.openai.com/v1 --model gpt-4o-mini --api-key-env OPENAI_API_KEY`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runMatrixRun(c.Context(), opts)
		},
	}
	f := run.Flags()
	f.StringVar(&opts.Harness.OutDir, "out", "assay-out", "output directory (evidence store, gateway database, case directories, report)")
	f.StringVar(&opts.Formations, "formations", "sequential,parallel", "comma-separated catalog cases, or \"all\" (catalog: "+strings.Join(harness.CatalogNames(), ", ")+")")
	f.StringVar(&opts.Harness.Profile, "profile", "standard", "task profile: "+strings.Join(harness.ProfileNames(), " or "))
	f.StringVar(&opts.Harness.Language, "language", "go", "artifact language: "+strings.Join(harness.Languages, " or "))
	f.IntVar(&opts.Harness.Concurrency, "concurrency", 1, "how many cases run at once")
	f.StringVar(&opts.Harness.BaseURL, "base-url", "", "OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1); empty starts the embedded reference provider")
	f.StringVar(&opts.Harness.Model, "model", "", "model id (default "+reference.ModelID+" on the reference provider; required with --base-url)")
	f.StringVar(&opts.APIKeyEnv, "api-key-env", "", "name of the environment variable holding the provider API key (the key itself is never recorded)")
	f.StringVar(&opts.Harness.SessionHeader, "session-header", "X-Session-Id", "HTTP header that carries each member's session id")
	f.BoolVar(&opts.Harness.Stream, "stream", false, "request SSE streaming responses")
	f.StringVar(&opts.Harness.Tenant, "tenant", "local", "tenant recorded in every run's envelope")
	f.DurationVar(&opts.Harness.RequestTimeout, "request-timeout", 60*time.Second, "deadline of one provider request")
	f.StringArrayVar(&opts.Faults, "reference-fault", nil, "inject a fault into the embedded reference provider: MEMBER:TURN:KIND[:ARG] (TURN -1 = every turn; KIND "+
		strings.Join(reference.FaultKinds(), "|")+"; ARG the reply of replace_reply or the delay of slow); repeatable")
	f.StringVar(&opts.Format, "format", "table", "output format: table or json")
	f.StringArrayVar(&opts.ModelAliases, "model-alias", nil, "REQUESTED=ANSWERED: a model id the provider may answer with for the one asked for (routing accepts and shows it; a dated snapshot such as gpt-4o-mini-2024-07-18 needs none); repeatable")
	f.StringVar(&opts.Harness.PolicyFile, "policy", "", "policy file (YAML or JSON) deciding every tool call; its SHA-256 is each run's policy digest (default: allow every call within a member's allowed tools)")
	f.StringVar(&opts.Harness.ApprovalsFile, "approvals", "", "approval file whose exact grants are preloaded for unattended runs (assay approve writes one); a call policy asks about that no grant covers fails its member as paused for approval")
	f.StringVar(&opts.Harness.Mode, "mode", "live", "run mode: live, dry_run (tools that are not readonly are simulated) or observe (asks recorded, not enforced); dry_run and observe runs are non_certifiable, never accepted")
	f.Int64Var(&opts.Harness.MemberToolCalls, "member-tool-calls", harness.DefaultMemberToolCalls, "hard limit on tool calls per member over a case, reserved before each dispatch (retries and reconciliation included)")
	f.Int64Var(&opts.Harness.TeamToolCalls, "team-tool-calls", harness.DefaultTeamToolCalls, "hard limit on tool calls per case's team, shared by its members")
	f.Int64Var(&opts.Harness.MemberTokens, "member-tokens", 0, "hard limit on provider tokens per member over a case (total_tokens as responses reported them; 0 = no limit); a request is refused once the member's tokens reach it, or when earlier usage was not reported")
	f.Int64Var(&opts.Harness.TeamTokens, "team-tokens", 0, "hard limit on provider tokens per case's team, shared by its members (0 = no limit); refused like --member-tokens")
	f.DurationVar(&opts.Harness.StoreWait, "wait", 0, "wait up to this long for the evidence store held by another process (default: fail at once, naming it)")
	f.StringVar(&opts.Harness.ReplayTolerance, "replay-tolerance", "exact", "replay tolerance policy bound in every run's envelope: "+strings.Join(tolerance.Names(), " or ")+
		" ('assay replay verify' compares under it and no other; docs/replay.md)")
	cmd.AddCommand(run)
	return cmd
}

func runMatrixRun(ctx context.Context, opts *MatrixRunOptions) error {
	if err := checkFormat(opts.Format, "table", "json"); err != nil {
		return err
	}
	h := opts.Harness
	for _, f := range strings.Split(opts.Formations, ",") {
		if f = strings.TrimSpace(f); f != "" {
			h.Formations = append(h.Formations, f)
		}
	}
	if len(h.Formations) == 0 {
		return badInput(errors.New("--formations is empty"))
	}
	if opts.APIKeyEnv != "" {
		if h.BaseURL == "" {
			return badInput(errors.New("--api-key-env needs --base-url: the embedded reference provider takes no key"))
		}
		key, ok := os.LookupEnv(opts.APIKeyEnv)
		if !ok || key == "" {
			return badInput(fmt.Errorf("environment variable %s (named by --api-key-env) is not set", opts.APIKeyEnv))
		}
		h.APIKey = key
		h.APIKeyEnv = opts.APIKeyEnv
	}
	if h.MemberToolCalls <= 0 || h.TeamToolCalls <= 0 {
		return badInput(fmt.Errorf("--member-tool-calls %d and --team-tool-calls %d must be positive", h.MemberToolCalls, h.TeamToolCalls))
	}
	if h.MemberTokens < 0 || h.TeamTokens < 0 {
		return badInput(fmt.Errorf("--member-tokens %d and --team-tokens %d must not be negative (0 = no limit)", h.MemberTokens, h.TeamTokens))
	}
	for _, a := range opts.ModelAliases {
		req, ans, ok := strings.Cut(a, "=")
		if h.ModelAliases == nil {
			h.ModelAliases = map[string]string{}
		}
		if !ok {
			return badInput(fmt.Errorf("--model-alias %q: want REQUESTED=ANSWERED", a))
		}
		h.ModelAliases[strings.TrimSpace(req)] = strings.TrimSpace(ans)
	}
	for _, spec := range opts.Faults {
		fault, err := reference.ParseFault(spec)
		if err != nil {
			return badInput(fmt.Errorf("--reference-fault: %w", err))
		}
		h.ReferenceFaults = append(h.ReferenceFaults, fault)
	}
	if len(h.ReferenceFaults) > 0 && h.BaseURL != "" {
		return badInput(errors.New("--reference-fault applies only to the embedded reference provider, not with --base-url"))
	}
	h.ToolVersion = version
	h.Command = "assay matrix run"
	if h.OutDir == "" {
		return badInput(errors.New("--out is empty; name an output directory"))
	}
	if h.RequestTimeout <= 0 {
		return badInput(fmt.Errorf("--request-timeout %s must be positive", h.RequestTimeout))
	}
	if h.StoreWait < 0 {
		return badInput(fmt.Errorf("--wait %s is negative", h.StoreWait))
	}
	h.Progress = opts.IO.ErrOut
	if err := h.Normalize(); err != nil {
		return badInput(err)
	}

	sum, err := harness.Run(ctx, h)
	if err != nil && ctx.Err() != nil {
		// Interrupted: the case in progress stays open in the store and is marked interrupted (never
		// accepted) when a writer next opens it; finished cases stay finalized.
		return failed("interrupted after %d finished cases; the case in progress was not finalized and will be marked interrupted: %v", len(sum.Cases), err)
	}
	if err != nil {
		return badInput(err)
	}
	reportPath := filepath.Join(h.OutDir, "report.md")
	if err := writeMatrixReport(ctx, sum, reportPath); err != nil {
		return fmt.Errorf("write %s: %w", reportPath, err)
	}
	if opts.Format == "json" {
		if err := writeJSON(opts.IO.Out, sum); err != nil {
			return err
		}
	} else {
		if err := matrixTable(sum).writeText(opts.IO.Out); err != nil {
			return err
		}
		fmt.Fprintf(opts.IO.Out, "\nprovider: %s\nevidence: %s\nreport:   %s\n", sum.Provider, sum.StorePath, reportPath)
		writePausedHint(opts.IO.Out, sum.Cases, h.OutDir)
	}
	if !sum.Accepted() {
		var rejected []string
		for _, c := range sum.Cases {
			if c.Verdict.Verdict != "accepted" {
				rejected = append(rejected, c.Case+" "+c.Verdict.Verdict)
			}
		}
		return failed("%d of %d cases not accepted: %s", len(rejected), len(sum.Cases), strings.Join(rejected, ", "))
	}
	return nil
}

// matrixTable is the printed table: one row per case.
func matrixTable(sum harness.Summary) table {
	t := table{header: []string{"CASE", "FORMATION", "MEMBERS", "ELAPSED", "FILES", "TESTS", "ORACLE", "EVIDENCE", "EFFECTS", "SESSIONS", "USAGE", "VERDICT"}}
	for _, c := range sum.Cases {
		status := map[string]string{}
		for _, ch := range c.Checks {
			status[ch.Name] = ch.Status
		}
		get := func(name string) string {
			if s, ok := status[name]; ok {
				return s
			}
			return "not run"
		}
		usage := get("usage")
		if usage == "passed" {
			usage = "conserved"
		}
		t.rows = append(t.rows, []string{c.RunID, c.Catalog, fmt.Sprint(c.Members), fmt.Sprintf("%.1fs", c.ElapsedSeconds),
			get("files"), get("tests"), get("oracle"), get("formation"), get("effects"), get("sessions"), usage, verdictLabel(c)})
	}
	return t
}

// writePausedHint tells how to continue the paused cases, if any: the calls they wait for, and the
// resume command.
func writePausedHint(w io.Writer, cases []harness.CaseResult, out string) {
	for _, c := range cases {
		if !c.Paused {
			continue
		}
		fmt.Fprintf(w, "\npaused:   %s (case %s) waits: see 'assay effects %s --out %s --state awaiting_approval' (or --state unknown),\n"+
			"          approve with 'assay approve %s CALL --out %s', then continue with 'assay resume %s --out %s' (with the same --policy)\n",
			c.RunID, c.Case, c.RunID, out, c.RunID, out, c.RunID, out)
	}
}

// verdictLabel is a case's verdict as the table shows it: a paused case is rejected, and says it
// paused (assay resume continues it).
func verdictLabel(c harness.CaseResult) string {
	if c.Paused {
		return c.Verdict.Verdict + " (paused)"
	}
	return c.Verdict.Verdict
}

// writeMatrixReport reads the matrix's runs back from the evidence store and writes report.md atomically.
func writeMatrixReport(ctx context.Context, sum harness.Summary, path string) error {
	store, err := evidence.Open(ctx, sum.StorePath, evidence.OpenOptions{ReadOnly: true, Command: "assay matrix run (report)"})
	if err != nil {
		return err
	}
	defer store.Close()
	rep := reports.MatrixReport{Provider: sum.Provider, Model: sum.Model, Reference: sum.Reference, StorePath: sum.StorePath,
		CasesDir: filepath.Join(sum.OutDir, "cases")}
	for _, c := range sum.Cases {
		r, err := store.Run(ctx, c.RunID)
		if err != nil {
			return err
		}
		rep.Runs = append(rep.Runs, r)
	}
	var buf bytes.Buffer
	if err := reports.Markdown(&buf, rep); err != nil {
		return err
	}
	return reports.WriteFileAtomic(path, buf.Bytes())
}

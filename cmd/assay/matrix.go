package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence/attest"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/harness/replay/tolerance"
	"github.com/assay-audit/assay/reports"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/tasks"
)

// MatrixRunOptions are the parsed flags of `assay matrix run`: Harness holds the run's options as
// parsed (its Formations split from --formations, its ReferenceFaults parsed from
// --reference-fault); harness.Normalize validates them.
type MatrixRunOptions struct {
	IO      IOStreams
	Harness harness.Options
	Format  string
	// SignKey is --sign-key: the private key attestations are signed with; "" signs none.
	SignKey string
	// Progress is --progress: auto, tty, plain or none (progressSetting).
	Progress string
	// MatrixFile is --matrix FILE: a matrix file (docs/matrix-file.md) whose axes replace the flags'.
	MatrixFile string
	// AxisFlags are the axis flags given on the command line, by matrix file axis (e.g.
	// "languages": "--language"): a file that sets the same axis is refused naming both.
	AxisFlags map[string][]string
	// GroupBy is --group-by: the axis the table, the JSON and the reports also group cases by
	// (reports.GroupAxisNames); "" groups by nothing but the invocation, as before.
	GroupBy string
}

// axisFlags are the flags that set each matrix file axis.
var axisFlags = []struct{ axis, flag string }{
	{harness.AxisProviders, "base-url"}, {harness.AxisProviders, "model"}, {harness.AxisProviders, "api-key-env"},
	{harness.AxisProviders, "stream"}, {harness.AxisCases, "formations"}, {harness.AxisTasks, "task"}, {harness.AxisLanguages, "language"},
	{harness.AxisProfiles, "profile"}, {harness.AxisRepeat, "repeat"},
}

// NewCmdMatrix builds `assay matrix` and its `run` subcommand. runF replaces runMatrixRun in tests.
func NewCmdMatrix(io IOStreams, runF func(context.Context, *MatrixRunOptions) error) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Run formation matrices against a provider",
	}
	opts := &MatrixRunOptions{IO: io}
	var formations string
	var faults, aliases []string
	run := &cobra.Command{
		Use:   "run",
		Short: "Run every selected formation on a task profile and accept or reject each case from evidence",
		Long: longHelp("0 when every case is accepted; 1 when any case is not, or the run could not go on (an I/O or "+
			"store failure); 2 on bad input or options, or a store another process holds.",
			fmt.Sprintf("Run each selected case of the catalog (%d: one per formation, the ensemble modes of parallel, "+
				"sequential+remote) against an OpenAI-compatible provider (by default the embedded reference provider, not a "+
				"language model) behind the observing gateway, and accept a case only when every required check passes: %s. "+
				"Each case is finalized in <out>/evidence.duckdb, a rejected one naming every failed check, never re-run; "+
				"<out>/report.md is the report. Every tool call passes the execution boundary (--policy, --approvals, "+
				"budgets); --mode dry_run and observe are never accepted; secrets are masked. Profiles: %s; languages: %s. "+
				"Reference: docs/cli.md, docs/safety.md.",
				len(harness.Catalog()), strings.Join(checkNames(), ", "), list("and", harness.ProfileNames()...), list("and", harness.Languages()...))),
		Example: `  assay matrix run
  assay matrix run --formations all --concurrency 2
  assay matrix run --formations reflection,parallel+vote --profile single-file --language python
  assay matrix run --formations parallel --format json
  assay matrix run --policy policy.yaml --approvals assay-out/approvals.json
  assay matrix run --matrix matrix.yaml --group-by provider
  assay matrix run --formations sequential --repeat 3 --group-by repeat
  assay matrix run --mode dry_run
  assay matrix run --member-tokens 20000 --team-tokens 100000
  OPENAI_API_KEY=... assay matrix run --base-url https://api.openai.com/v1 --model gpt-4o-mini --api-key-env OPENAI_API_KEY`,
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			var err error
			if opts.Harness.Formations, err = splitList("--formations", formations); err != nil {
				return err
			}
			if opts.Harness.ReferenceFaults, err = parseFaults("--reference-fault", faults); err != nil {
				return err
			}
			if opts.Harness.ModelAliases, err = parseAliases("--model-alias", aliases); err != nil {
				return err
			}
			if err := checkProgressFlag(c.Flags(), opts.Progress); err != nil {
				return err
			}
			if c.Flags().Changed("repeat") && opts.Harness.Repeat > harness.MaxRepeat {
				return usageErrorf("--repeat %d: at most %d repeats of each case", opts.Harness.Repeat, harness.MaxRepeat)
			}
			if c.Flags().Changed("repeat") && opts.Harness.Repeat < 1 {
				return usageErrorf("--repeat %d: each case runs at least once; give N >= 1 (without --repeat each case runs once, without a repeat index)", opts.Harness.Repeat)
			}
			if c.Flags().Changed("concurrency") && opts.Harness.Concurrency == 0 {
				return usageErrorf("--concurrency 0: at least one case must run at a time (the default is 1)")
			}
			opts.AxisFlags = map[string][]string{}
			for _, a := range axisFlags {
				if c.Flags().Changed(a.flag) {
					opts.AxisFlags[a.axis] = append(opts.AxisFlags[a.axis], "--"+a.flag)
				}
			}
			if opts.GroupBy != "" {
				if _, ok := reports.LookupGroupAxis(opts.GroupBy); !ok {
					return usageErrorf("--group-by %q is not one of %s", opts.GroupBy, strings.Join(reports.GroupAxisNames(), ", "))
				}
			}
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runMatrixRun(c.Context(), opts)
		},
	}
	f := run.Flags()
	f.StringVar(&opts.Harness.OutDir, "out", "assay-out", "output directory (evidence store, gateway database, case directories, report)")
	f.StringVar(&formations, "formations", "sequential,parallel", "comma-separated catalog cases, or \"all\" (catalog: "+strings.Join(harness.CatalogNames(), ", ")+")")
	f.StringVar(&opts.Harness.Profile, "profile", "standard", "task profile: "+strings.Join(harness.ProfileNames(), " or "))
	f.StringVar(&opts.Harness.Language, "language", "go", "artifact language: "+strings.Join(harness.Languages(), " or "))
	f.StringVar(&opts.Harness.Task, "task", "double", "task: a built-in task ("+strings.Join(tasks.BuiltinNames(), ", ")+"; assay tasks lists them) or a task file's path (docs/tasks.md); "+
		"its name and SHA-256 are bound in each case's manifest and its bytes stored with the run")
	f.IntVar(&opts.Harness.Repeat, "repeat", 0, "run each selected case N times (N >= 1), each repeat its own case with its own run and verdict, never a retry; "+
		"its envelope records its repeat index 1..N (default: each case once, without a repeat index; a matrix file's repeat: N)")
	f.IntVar(&opts.Harness.Concurrency, "concurrency", 1, "how many cases run at once (at least 1)")
	f.StringVar(&opts.Harness.BaseURL, "base-url", "", "OpenAI-compatible base URL (e.g. http://127.0.0.1:8000/v1); empty starts the embedded reference provider")
	f.StringVar(&opts.Harness.Model, "model", "", "model id (default "+reference.ModelID+" on the reference provider; required with --base-url)")
	f.StringVar(&opts.Harness.APIKeyEnv, "api-key-env", "", "name of the environment variable holding the provider API key (the key itself is never recorded)")
	f.StringVar(&opts.Harness.SessionHeader, "session-header", "X-Session-Id", "HTTP header that carries each member's session id")
	f.BoolVar(&opts.Harness.Stream, "stream", false, "request SSE streaming responses")
	f.StringVar(&opts.Harness.Tenant, "tenant", "local", "tenant recorded in every run's envelope")
	f.DurationVar(&opts.Harness.RequestTimeout, "request-timeout", 60*time.Second, "deadline of one provider request (0 = the default)")
	f.StringArrayVar(&faults, "reference-fault", nil, "inject a fault into the embedded reference provider: MEMBER:TURN:KIND[:ARG] (TURN -1 = every turn; KIND "+
		strings.Join(reference.FaultKinds(), "|")+"; ARG the reply of replace_reply or the delay of slow); repeatable")
	f.StringVar(&opts.Format, "format", "table", "output format: table or json")
	f.StringVar(&opts.MatrixFile, "matrix", "", "matrix file (YAML, docs/matrix-file.md): providers x cases x tasks x languages x profiles x repeat, run into one "+
		"evidence store; an axis the file sets may not also be given by its flag (--base-url/--model/--api-key-env/--stream, --formations, --task, --language, --profile, --repeat)")
	f.StringVar(&opts.GroupBy, "group-by", "", "also group the cases in the table, the JSON and the reports by one axis: "+strings.Join(reports.GroupAxisNames(), ", "))
	f.StringArrayVar(&opts.Harness.FormationOptions, "formation-option", nil, "NAME=VALUE: set a formation option (assay formations lists them with defaults and ranges) on every selected case whose formation has it; "+
		"only options the checks re-derive are accepted, checked by the formation's own validation before anything runs, and recorded in the case manifest; repeatable")
	f.StringVar(&opts.Harness.Capacity, "capacity", "", "capacity admission of the plain parallel cases ("+strings.Join(harness.PlainParallelCases(), ", ")+
		"): N admits members through N slots, queuing the rest with a member_throttled event each; provider uses the provider's declared "+
		"max_parallel_requests from GET /models/{model} (none declared is an error, never unlimited); recorded as capacity_declared and re-derived by the formation check")
	f.StringArrayVar(&aliases, "model-alias", nil, "REQUESTED=ANSWERED: a model id the provider may answer with for the one asked for (routing accepts and shows it; a dated snapshot such as gpt-4o-mini-2024-07-18 needs none); repeatable")
	f.StringVar(&opts.Harness.PolicyFile, "policy", "", "policy file (YAML or JSON) deciding every tool call; its SHA-256 is each run's policy digest (default: allow every call within a member's allowed tools)")
	f.StringVar(&opts.Harness.ApprovalsFile, "approvals", "", "approval file whose exact grants are preloaded for unattended runs (assay approve writes one); a call policy asks about that no grant covers fails its member as paused for approval")
	f.StringVar(&opts.Harness.Mode, "mode", "live", "run mode: live, dry_run (tools that are not readonly are simulated) or observe (asks recorded, not enforced); dry_run and observe runs are non_certifiable, never accepted")
	f.Int64Var(&opts.Harness.MemberToolCalls, "member-tool-calls", harness.DefaultMemberToolCalls, "hard limit on tool calls per member over a case, reserved before each dispatch (retries and reconciliation included; 0 = the default)")
	f.Int64Var(&opts.Harness.TeamToolCalls, "team-tool-calls", harness.DefaultTeamToolCalls, "hard limit on tool calls per case's team, shared by its members (0 = the default)")
	f.Int64Var(&opts.Harness.MemberTokens, "member-tokens", 0, "hard limit on provider tokens per member over a case (total_tokens as responses reported them; 0 = no limit); a request is refused once the member's tokens reach it, or when earlier usage was not reported")
	f.Int64Var(&opts.Harness.TeamTokens, "team-tokens", 0, "hard limit on provider tokens per case's team, shared by its members (0 = no limit); refused like --member-tokens")
	f.DurationVar(&opts.Harness.StoreWait, "wait", 0, "wait up to this long for the evidence store held by another process (default: fail at once, naming it)")
	f.StringVar(&opts.SignKey, "sign-key", "", "Ed25519 private key (assay keygen) signing each run as an in-toto attestation right after it is finalized")
	f.StringVar(&opts.Harness.AttestDir, "attestations", "", "directory the attestations are written to (default <out>/attestations; keep a copy elsewhere)")
	f.StringVar(&opts.Harness.ReplayTolerance, "replay-tolerance", "exact", "replay tolerance policy bound in every run's envelope: "+strings.Join(tolerance.Names(), " or ")+
		" ('assay replay verify' compares under it and no other; docs/replay.md)")
	addProgressFlag(f, &opts.Progress)
	cmd.AddCommand(run)
	return cmd
}

func runMatrixRun(ctx context.Context, opts *MatrixRunOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	h := opts.Harness
	progressOut, style, totals, err := progressSetting(opts.Progress, opts.IO.ErrOut)
	if err != nil {
		return err
	}
	h.ToolVersion, h.Command, h.Progress, h.ProgressStyle = version, "assay matrix run", progressOut, style
	h.InvocationID = harness.NewInvocationID()
	cells, err := matrixCells(opts, h)
	if err != nil {
		return err
	}
	if err := setSigner(&h, opts.SignKey); err != nil {
		return err
	}
	for i := range cells {
		cells[i].Signer = h.Signer
	}
	sum, err := harness.RunMatrix(ctx, cells)
	if err != nil && ctx.Err() != nil {
		// Interrupted: the case in progress stays open in the store and is marked interrupted (never
		// accepted) when a writer next opens it; finished cases stay finalized.
		if totals && sum.StorePath != "" {
			writeRunTotals(opts.IO.ErrOut, sum, "")
		}
		return failed("interrupted after %d finished cases; the case in progress was not finalized and will be marked interrupted: %v", len(sum.Cases), err)
	}
	if err != nil {
		return err
	}
	reportPath, err := writeMatrixReport(ctx, sum, h.InvocationID, opts.GroupBy)
	if err != nil {
		return err
	}
	if totals {
		writeRunTotals(opts.IO.ErrOut, sum, reportPath)
	}
	if format == "json" {
		if err := writeSummaryJSON(opts.IO.Out, sum, opts.GroupBy); err != nil {
			return err
		}
	} else {
		if err := matrixTable(sum, opts.MatrixFile != "" || h.Repeat > 0).writeText(opts.IO.Out); err != nil {
			return err
		}
		if opts.GroupBy != "" {
			fmt.Fprintln(opts.IO.Out)
			if err := groupTable(sum, opts.GroupBy).writeText(opts.IO.Out); err != nil {
				return err
			}
		}
		fmt.Fprintf(opts.IO.Out, "\nprovider: %s\nevidence: %s\nreport:   %s\n", sum.Provider, sum.StorePath, reportPath)
		writePausedHint(ctx, opts.IO.Out, sum.Cases, sum.StorePath, sum.OutDir, h)
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

// splitList splits a comma-separated flag value into its elements; an empty element (",,") is bad
// usage, not "not given".
func splitList(flag, value string) ([]string, error) {
	var out []string
	for _, v := range strings.Split(value, ",") {
		if v = strings.TrimSpace(v); v == "" {
			return nil, usageErrorf("%s %q has an empty element", flag, value)
		}
		out = append(out, v)
	}
	return out, nil
}

// parseAliases parses each REQUESTED=ANSWERED of flag into a map (nil for none); harness.Normalize
// refuses an empty or identical pair.
func parseAliases(flag string, values []string) (map[string]string, error) {
	var out map[string]string
	for _, a := range values {
		req, ans, ok := strings.Cut(a, "=")
		if !ok {
			return nil, usageErrorf("%s %q: want REQUESTED=ANSWERED", flag, a)
		}
		if out == nil {
			out = map[string]string{}
		}
		req, ans = strings.TrimSpace(req), strings.TrimSpace(ans)
		if prev, dup := out[req]; dup && prev != ans {
			return nil, usageErrorf("%s: %s is given twice (%s and %s)", flag, req, prev, ans)
		}
		out[req] = ans
	}
	return out, nil
}

// parseFaults parses each MEMBER:TURN:KIND[:ARG] of flag.
func parseFaults(flag string, specs []string) ([]reference.Fault, error) {
	var out []reference.Fault
	for _, spec := range specs {
		f, err := reference.ParseFault(spec)
		if err != nil {
			// The sentinel's own text ("reference: invalid config") names no fix: say the flag.
			return nil, usageErrorf("%s %w", flag, withoutPrefix(err, reference.ErrInvalidConfig.Error()+": "))
		}
		out = append(out, f)
	}
	return out, nil
}

// matrixCells is the matrix the options run: the cells of --matrix FILE (refused, naming both,
// when a flag gives an axis the file sets too), or the one cell the flags give.
func matrixCells(opts *MatrixRunOptions, h harness.Options) ([]harness.Options, error) {
	if opts.MatrixFile == "" {
		return []harness.Options{h}, nil
	}
	m, err := harness.LoadMatrixFile(opts.MatrixFile)
	if err != nil {
		return nil, err
	}
	for _, axis := range m.Axes() {
		if flags := opts.AxisFlags[axis]; len(flags) > 0 {
			return nil, usageErrorf("--matrix %s sets %s and %s gives it too: give the axis in one place", opts.MatrixFile, axis, strings.Join(flags, " and "))
		}
	}
	return m.Cells(h)
}

// matrixTable is the printed table: one row per case, with its provider, model and repeat index
// when a matrix file or --repeat ran it (withMatrix). RUN is the run id and CASE the catalog case;
// FILES to USAGE are the checks of those names (FORMATION: the formation's decisions recomputed),
// and OTHER the rest of the case's checks: "passed" when all passed, else each that did not with its
// status, so that no required check's failure is left out of the row.
func matrixTable(sum harness.Summary, withMatrix bool) table {
	shown := []string{"files", "tests", "oracle", "formation", "effects", "sessions", "usage"}
	t := table{header: []string{"RUN", "CASE", "MEMBERS", "ELAPSED", "FILES", "TESTS", "ORACLE", "FORMATION", "EFFECTS", "SESSIONS", "USAGE", "OTHER", "VERDICT"}}
	if withMatrix {
		t.header = append([]string{"RUN", "PROVIDER", "MODEL", "REPEAT"}, t.header[1:]...)
	}
	for _, c := range sum.Cases {
		status := map[string]string{}
		var other []string
		otherPassed := 0
		for _, ch := range c.Checks {
			status[ch.Name] = ch.Status
			switch {
			case slices.Contains(shown, ch.Name):
			case ch.Status == "passed":
				otherPassed++
			default:
				other = append(other, ch.Name+" "+ch.Status)
			}
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
		rest := strings.Join(other, ", ")
		switch {
		case rest == "" && otherPassed > 0:
			rest = "passed"
		case rest == "":
			rest = "-"
		}
		row := []string{c.RunID, c.Catalog, fmt.Sprint(c.Members), fmt.Sprintf("%.1fs", c.ElapsedSeconds),
			get("files"), get("tests"), get("oracle"), get("formation"), get("effects"), get("sessions"), usage, rest, verdictLabel(c)}
		if withMatrix {
			row = append([]string{c.RunID, c.Provider, c.Model, repeatCell(c.Repeat)}, row[1:]...)
		}
		t.rows = append(t.rows, row)
	}
	return t
}

// repeatCell is a repeat index as the table shows it: "-" for a case that is not a repeat.
func repeatCell(n int) string {
	if n == 0 {
		return "-"
	}
	return fmt.Sprint(n)
}

// caseGroup is the cases of a matrix run sharing one key on a --group-by axis; each repeat is its
// own case, counted on its own.
type caseGroup struct {
	Key         string   `json:"key"`
	Cases       int      `json:"cases"`
	Accepted    int      `json:"accepted"`
	NotAccepted int      `json:"not_accepted"`
	RunIDs      []string `json:"run_ids"`
}

// groupCases groups sum's cases by axis (reports.GroupAxes keys, read from each case as the
// harness recorded it), keys in order of first appearance.
func groupCases(sum harness.Summary, axis string) []caseGroup {
	key := func(c harness.CaseResult) string {
		switch axis {
		case "provider":
			return c.Provider
		case "model":
			return c.Model
		case "task":
			return c.Task
		case "language":
			return c.Language
		case "profile":
			return c.Profile
		case "case":
			return c.Catalog
		case "repeat":
			if c.Repeat == 0 {
				return reports.NotARepeat
			}
			return fmt.Sprint(c.Repeat)
		}
		return ""
	}
	var out []caseGroup
	index := map[string]int{}
	for _, c := range sum.Cases {
		k := key(c)
		i, ok := index[k]
		if !ok {
			i = len(out)
			index[k] = i
			out = append(out, caseGroup{Key: k, RunIDs: []string{}})
		}
		g := &out[i]
		g.Cases++
		if c.Verdict.Verdict == "accepted" {
			g.Accepted++
		} else {
			g.NotAccepted++
		}
		g.RunIDs = append(g.RunIDs, c.RunID)
	}
	return out
}

// groupTable is the printed table of groupCases.
func groupTable(sum harness.Summary, axis string) table {
	t := table{header: []string{strings.ToUpper(axis), "CASES", "ACCEPTED", "NOT ACCEPTED"}}
	for _, g := range groupCases(sum, axis) {
		t.rows = append(t.rows, []string{g.Key, fmt.Sprint(g.Cases), fmt.Sprint(g.Accepted), fmt.Sprint(g.NotAccepted)})
	}
	return t
}

// writePausedHint tells how to continue each paused case: for every call its team run waits for,
// read from the recorded effects (never from the runtime's pause text), the command that resolves
// it (assay approve for a call awaiting approval, assay reconcile for an effect whose outcome is
// unknown), then the resume command line. Resume takes the run's recorded mode, tenant and policy
// file by default, so the line repeats only what no run records: the API key's variable, a session
// header, a request timeout or an approvals file given now. When the effects cannot be read, it
// says where to look instead.
func writePausedHint(ctx context.Context, w io.Writer, cases []harness.CaseResult, storePath, out string, h harness.Options) {
	for _, c := range cases {
		if !c.Paused {
			continue
		}
		fmt.Fprintf(w, "\npaused:   %s (case %s) waits for:\n", c.RunID, c.Case)
		effs, err := harness.Effects(ctx, harness.EffectsQuery{StorePath: storePath, Runs: []string{c.RunID}, Command: "assay (paused hint)"})
		waits := 0
		for _, e := range effs {
			call := e.MemberID + ":" + e.CallID
			switch e.State {
			case effect.AwaitingApproval:
				fmt.Fprintf(w, "          - %s (%s) awaits approval: assay approve %s %s --out %s --approver NAME\n", call, e.Tool, c.RunID, call, out)
			case effect.Unknown:
				fmt.Fprintf(w, "          - %s (%s) has an unknown outcome: assay reconcile %s %s --out %s --lookup (or --outcome succeeded|failed --note TEXT)\n",
					call, e.Tool, c.RunID, call, out)
			default:
				continue
			}
			waits++
		}
		if err != nil || waits == 0 {
			fmt.Fprintf(w, "          see 'assay effects %s --out %s' for the calls awaiting approval or with an unknown outcome\n", c.RunID, out)
		}
		fmt.Fprintf(w, "          then: %s\n", resumeCommand(c.RunID, out, h))
	}
}

// resumeCommand is the assay resume command line that continues run: --out, and the options of h
// that no run records (resume takes the mode, tenant, policy file, model and base URL the run
// recorded).
func resumeCommand(run, out string, h harness.Options) string {
	args := []string{"assay", "resume", run, "--out", out}
	if h.APIKeyEnv != "" {
		args = append(args, "--api-key-env", h.APIKeyEnv)
	}
	if h.SessionHeader != "" && h.SessionHeader != "X-Session-Id" {
		args = append(args, "--session-header", h.SessionHeader)
	}
	if h.RequestTimeout != 0 && h.RequestTimeout != 60*time.Second {
		args = append(args, "--request-timeout", h.RequestTimeout.String())
	}
	if h.ApprovalsFile != "" && filepath.Clean(h.ApprovalsFile) != filepath.Clean(harness.ApprovalsPath(out)) {
		args = append(args, "--approvals", h.ApprovalsFile)
	}
	for i, a := range args {
		if strings.ContainsAny(a, " \t'\"$`\\") {
			args[i] = "'" + strings.ReplaceAll(a, "'", `'\''`) + "'"
		}
	}
	return strings.Join(args, " ")
}

// verdictLabel is a case's verdict as the table shows it: a paused case is rejected, and says it
// paused (assay resume continues it).
func verdictLabel(c harness.CaseResult) string {
	if c.Paused {
		return c.Verdict.Verdict + " (paused)"
	}
	return c.Verdict.Verdict
}

// writeMatrixReport writes the reports of invocation's runs (and the interrupted runs it sealed),
// from what the evidence store holds, under OUT/reports/<invocation>/ with copies in OUT
// (reports.WriteInvocationReports), and returns the path of the invocation's report.md.
func writeMatrixReport(ctx context.Context, sum harness.Summary, invocation, groupBy string) (string, error) {
	runIDs := append([]string(nil), sum.Sealed...) // interrupted runs this invocation sealed: shown, rejected
	for _, c := range sum.Cases {
		runIDs = append(runIDs, c.RunID)
	}
	w, err := reports.WriteInvocationReports(ctx, sum.StorePath, invocation, runIDs, harness.BindingCheckers(filepath.Dir(sum.StorePath)), groupBy)
	if err != nil {
		return "", err
	}
	return filepath.Join(w.Dir, "report.md"), nil
}

// keyFlagError is attest.LoadSigner's or LoadVerifier's error as bad usage of flag, without the
// package's prefixes ("--pubkey: unusable key: k.pem: ..." rather than "--pubkey: attest:
// unusable key: ...").
func keyFlagError(flag string, err error) error {
	return usageErrorf("%s: %w", flag, withoutPrefix(err, "attest: "))
}

// setSigner loads --sign-key into h.Signer; --attestations (h.AttestDir) without a key, or naming
// something that is not a directory, is bad usage, refused before anything runs.
func setSigner(h *harness.Options, signKey string) error {
	if signKey == "" && h.AttestDir != "" {
		return usageErrorf("--attestations names where --sign-key's attestations are written: add --sign-key KEY")
	}
	if h.AttestDir != "" {
		if fi, err := os.Stat(h.AttestDir); err == nil && !fi.IsDir() {
			return usageErrorf("--attestations %s is not a directory", h.AttestDir)
		}
	}
	if signKey == "" {
		return nil
	}
	signer, err := attest.LoadSigner(signKey)
	if err != nil {
		return keyFlagError("--sign-key", err)
	}
	h.Signer = signer
	return nil
}

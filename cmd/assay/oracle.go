package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/oracle"
)

// NewCmdOracle builds the `assay oracle` group: `specs` and `check`.
func NewCmdOracle(io IOStreams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "oracle",
		Short: "Check an artifact against a finite-domain oracle spec",
		Long: longHelp("",
			"The finite-domain oracle decides whether an artifact computes what a spec says without trusting the artifact's "+
				"own tests: it runs the artifact's function on every input of the spec's finite domain in a bounded subprocess "+
				"and compares every output exactly with a reference evaluated in assay's own process. Built-in specs: "+
				list("and", specNames()...)+". Reference: docs/cli.md."),
	}
	cmd.AddCommand(NewCmdOracleSpecs(io, nil), NewCmdOracleCheck(io, nil))
	return cmd
}

// OracleSpecsOptions are the parsed flags of `assay oracle specs`.
type OracleSpecsOptions struct {
	IO     IOStreams
	Format string
}

// NewCmdOracleSpecs builds `assay oracle specs`, which lists the built-in specs.
func NewCmdOracleSpecs(io IOStreams, runF func(context.Context, *OracleSpecsOptions) error) *cobra.Command {
	opts := &OracleSpecsOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "specs",
		Short: "List the built-in oracle specs",
		Long: longHelp("0 listed; 2 on bad input.",
			"List the built-in oracle specs: for each, the file and function it expects in every language it supports, the "+
				"number of checks (inputs) it runs, its signed-zero rule and what the function must compute. --format json adds "+
				"the domains and the reference expressions. Reference: docs/cli.md."),
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runOracleSpecs(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "table", "output format: table or json")
	return cmd
}

// specRange is one argument range of a domain in `assay oracle specs --format json`.
type specRange struct {
	Min  float64 `json:"min"`
	Max  float64 `json:"max"`
	Step float64 `json:"step"`
	Size int     `json:"size"`
}

// specDomain is one domain in `assay oracle specs --format json`.
type specDomain struct {
	Type string      `json:"type"`
	Args []specRange `json:"args"`
	Size int         `json:"size"`
}

// specRow is one spec in `assay oracle specs --format json`.
type specRow struct {
	Name       string            `json:"name"`
	Doc        string            `json:"doc"`
	Targets    []oracle.Target   `json:"targets"`
	Params     []string          `json:"params"`
	Domains    []specDomain      `json:"domains"`
	Reference  map[string]string `json:"reference"`
	SignedZero string            `json:"signed_zero"`
	Checks     int               `json:"checks"`
}

func runOracleSpecs(ctx context.Context, opts *OracleSpecsOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	var rows []specRow
	for _, s := range oracle.Specs() {
		row := specRow{Name: s.Name, Doc: s.Doc, Targets: s.Targets, Params: s.ParamNames(), Checks: s.Expected(),
			Reference:  map[string]string{oracle.LanguageGo: s.Reference.GoExpr, oracle.LanguagePython: s.Reference.PyExpr},
			SignedZero: s.SignedZero}
		if row.SignedZero == "" {
			row.SignedZero = oracle.SignedZeroExact
		}
		for _, d := range s.Domains {
			sd := specDomain{Type: d.Type, Size: d.Size()}
			for _, r := range d.Ranges() {
				sd.Args = append(sd.Args, specRange{Min: r.Min, Max: r.Max, Step: r.Step, Size: r.Size()})
			}
			row.Domains = append(row.Domains, sd)
		}
		rows = append(rows, row)
	}
	if format == "json" {
		return writeJSON(opts.IO.Out, map[string]any{"specs": rows})
	}
	t := table{header: []string{"SPEC", "TARGETS", "CHECKS", "SIGNED ZERO", "COMPUTES"}}
	for _, r := range rows {
		var targets []string
		for _, tg := range r.Targets {
			targets = append(targets, fmt.Sprintf("%s: %s %s(%s)", tg.Language, tg.File, tg.Function, strings.Join(r.Params, ", ")))
		}
		t.rows = append(t.rows, []string{r.Name, strings.Join(targets, "; "), strconv.Itoa(r.Checks), r.SignedZero, r.Doc})
	}
	return t.writeText(opts.IO.Out)
}

// OracleCheckOptions are the parsed flags of `assay oracle check`.
type OracleCheckOptions struct {
	IO       IOStreams
	Spec     string
	File     string
	Format   string
	Deadline time.Duration
	Cleanup  time.Duration
	Keep     string
}

// NewCmdOracleCheck builds `assay oracle check --spec NAME FILE`.
func NewCmdOracleCheck(io IOStreams, runF func(context.Context, *OracleCheckOptions) error) *cobra.Command {
	opts := &OracleCheckOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "check --spec NAME FILE",
		Short: "Run one oracle spec against a Go or Python file",
		Long: longHelp("0 for passed; 1 for any other verdict (unavailable, with no go tool or python3, is never a pass); 2 "+
			"on bad input: no such file, an unknown spec, a language not recognised or not supported by the spec, a negative "+
			"duration.",
			"Run the oracle spec NAME (see 'assay oracle specs') against FILE, whose extension names its language (.go: "+
				"the spec's generic Go function, in any package but main; .py: the spec's function at module level). Every "+
				"input of the spec's domain is checked and compared exactly, with types. Verdicts: "+
				list("and", oracle.CheckVerdicts()...)+". Reference: docs/cli.md."),
		Example: `  assay oracle check --spec double double.py
  assay oracle check --spec clamp --format json ./clamp/clamp.go`,
		Args: func(c *cobra.Command, args []string) error {
			if len(args) != 1 {
				return argCountError(c, "exactly one FILE", len(args))
			}
			return nil
		},
		RunE: func(c *cobra.Command, args []string) error {
			opts.File = args[0]
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runOracleCheck(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Spec, "spec", "double", "oracle spec to run (see 'assay oracle specs')")
	cmd.Flags().StringVar(&opts.Format, "format", "table", "output format: table or json (one object with a top-level verdict)")
	cmd.Flags().DurationVar(&opts.Deadline, "deadline", oracle.DefaultDeadline, "execution deadline of the driver (the Go build has its own; 0 = the default)")
	cmd.Flags().DurationVar(&opts.Cleanup, "cleanup", oracle.DefaultCleanup, "how long the driver's process group may take to be gone after it ends (0 = the default)")
	cmd.Flags().StringVar(&opts.Keep, "keep", "", "keep the working directory (driver, logs, report) inside this directory")
	return cmd
}

// checkOutput is the JSON object `assay oracle check --format json` prints.
type checkOutput struct {
	Verdict string `json:"verdict"`
	Spec    string `json:"spec"`
	// Language is the artifact language, "go" or "python".
	Language string `json:"language"`
	File     string `json:"file"`
	// Checks is the number of checks the driver's report claims; Expected what the spec demands.
	Checks   int `json:"checks"`
	Expected int `json:"expected"`
	// Failures is null when no complete report was read: unknown, not zero.
	Failures            *int             `json:"failures"`
	FirstFailures       []oracle.Failure `json:"first_failures"`
	Detail              string           `json:"detail"`
	ArtifactSHA256      string           `json:"artifact_sha256"`
	ArtifactSHA256After string           `json:"artifact_sha256_after"`
	Interpreter         string           `json:"interpreter"`
	DurationSeconds     float64          `json:"duration_seconds"`
	WorkDir             string           `json:"work_dir,omitempty"`
}

func runOracleCheck(ctx context.Context, opts *OracleCheckOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	path, err := filepath.Abs(opts.File)
	if err != nil {
		return fmt.Errorf("artifact %s: %w", opts.File, err)
	}
	spec, err := oracle.SpecForFile(opts.Spec, path)
	if err != nil {
		return err
	}
	oopts := oracle.Options{Deadline: opts.Deadline, Cleanup: opts.Cleanup, WorkDir: opts.Keep}
	if err := oopts.Validate(); err != nil {
		return err
	}
	if opts.Keep != "" {
		if fi, err := os.Stat(opts.Keep); err != nil || !fi.IsDir() {
			return usageErrorf("--keep %s is not a directory: name an existing directory to keep the working directory in", opts.Keep)
		}
	}
	fmt.Fprintf(opts.IO.ErrOut, "assay: checking %s against spec %s (%s, %d inputs)\n", opts.File, spec.Name, spec.Language, spec.Expected())
	res, err := oracle.Check(ctx, spec, path, oopts)
	if err != nil {
		return err
	}
	out := checkOutput{Verdict: res.Verdict, Spec: res.Spec, Language: res.Language, File: path, Checks: res.Checks,
		Expected: res.Expected, FirstFailures: res.FirstFailures, Detail: res.Detail, ArtifactSHA256: res.ArtifactSHA256,
		ArtifactSHA256After: res.ArtifactSHA256After, Interpreter: res.Interpreter,
		DurationSeconds: res.Duration.Seconds(), WorkDir: res.WorkDir}
	if res.Report {
		n := res.Failures
		out.Failures = &n
	}
	if out.FirstFailures == nil {
		out.FirstFailures = []oracle.Failure{}
	}
	if format == "json" {
		if err := writeJSON(opts.IO.Out, out); err != nil {
			return err
		}
	} else if err := writeCheckText(opts.IO, spec, out); err != nil {
		return err
	}
	if res.Verdict != oracle.VerdictPassed {
		return failed("oracle verdict %s for %s: %s", res.Verdict, opts.File, res.Detail)
	}
	return nil
}

// writeCheckText prints a check result for people: a block of fields, then the first failures.
func writeCheckText(io IOStreams, spec oracle.Spec, out checkOutput) error {
	failures := "unknown (no complete report was read)"
	if out.Failures != nil {
		failures = strconv.Itoa(*out.Failures)
	}
	t := table{header: []string{"VERDICT", out.Verdict}, rows: [][]string{
		{"spec", fmt.Sprintf("%s (%s: %s, function %s)", out.Spec, out.Language, spec.File, spec.Function)},
		{"file", out.File},
		{"checks", fmt.Sprintf("%d reported of %d demanded", out.Checks, out.Expected)},
		{"failures", failures},
		{"interpreter", out.Interpreter},
		{"sha256", out.ArtifactSHA256},
		{"duration", fmt.Sprintf("%.3fs", out.DurationSeconds)},
		{"detail", out.Detail},
	}}
	if out.ArtifactSHA256After != out.ArtifactSHA256 {
		t.rows = append(t.rows, []string{"sha256 after", out.ArtifactSHA256After})
	}
	if out.WorkDir != "" {
		t.rows = append(t.rows, []string{"work dir", out.WorkDir})
	}
	if err := t.writeText(io.Out); err != nil {
		return err
	}
	if len(out.FirstFailures) == 0 {
		return nil
	}
	fmt.Fprintln(io.Out)
	ft := table{header: []string{"TYPE", "INPUT", "EXPECTED", "ACTUAL", "ACTUAL TYPE"}}
	for _, f := range out.FirstFailures {
		ft.rows = append(ft.rows, []string{f.Type, f.Input, f.Expected, f.Actual, f.ActualType})
	}
	return ft.writeText(io.Out)
}

package main

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/tasks"
)

// TasksOptions are the parsed flags and arguments of `assay tasks` and `assay tasks show`.
type TasksOptions struct {
	IO     IOStreams
	Format string
	// Task is the task shown (a built-in name or a task file's path); "" lists the built-ins.
	Task string
}

// NewCmdTasks builds `assay tasks` (list the built-in tasks) and `assay tasks show NAME|FILE`.
func NewCmdTasks(io IOStreams, runF func(context.Context, *TasksOptions) error) *cobra.Command {
	opts := &TasksOptions{IO: io}
	run := func(c *cobra.Command) error {
		if runF != nil {
			return runF(c.Context(), opts)
		}
		return runTasks(c.Context(), opts)
	}
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "List the built-in task files (assay matrix run --task selects one, or a file of your own)",
		Long: longHelp("0 listed; 2 on bad input.",
			"List the built-in tasks ("+list("and", tasks.BuiltinNames()...)+"): task files embedded in assay, each declaring the "+
				"assignment per role, the deliverables per language and profile, the members' test command, the finite-domain "+
				"oracle (domains, reference expression evaluated in the oracle's own process, allowed imports) and the reference "+
				"solution the embedded reference provider answers with (it is not a model). `assay matrix run --task NAME|FILE` "+
				"runs one; a task file of your own follows docs/tasks.md and is validated against its JSON Schema. Reference: docs/cli.md."),
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error { return run(c) },
	}
	cmd.Flags().StringVar(&opts.Format, "format", "table", "output format: table or json")
	show := &cobra.Command{
		Use:   "show NAME|FILE",
		Short: "Validate a task file (or a built-in task) and print what it declares",
		Long: longHelp("0 shown; 2 when the task is unknown or its file is invalid (one line naming file, field and problem).",
			"Read and validate a task (a built-in name or a task file's path) as `assay matrix run --task` would, and print "+
				"its name, SHA-256, deliverables, test commands and oracle spec; --format json prints the task file's content as "+
				"JSON (snake_case keys; file and profile names are values) with its SHA-256. Reference: docs/cli.md, docs/tasks.md."),
		Example: "  assay tasks show double\n  assay tasks show tasks/testdata/triple.yaml --format json",
		Args:    cobra.ExactArgs(1),
		RunE: func(c *cobra.Command, args []string) error {
			opts.Task = args[0]
			return run(c)
		},
	}
	show.Flags().StringVar(&opts.Format, "format", "table", "output format: table or json")
	cmd.AddCommand(show)
	return cmd
}

func runTasks(ctx context.Context, opts *TasksOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	if opts.Task != "" {
		return showTask(opts, format)
	}
	var rows []tasks.Summary
	for _, name := range tasks.BuiltinNames() {
		t, err := tasks.Builtin(name)
		if err != nil {
			return err
		}
		rows = append(rows, t.Summarize())
	}
	if format == "json" {
		return writeJSON(opts.IO.Out, map[string]any{"tasks": rows})
	}
	t := table{header: []string{"TASK", "ORACLE CHECKS", "SHA256", "DOC"}}
	for _, r := range rows {
		t.rows = append(t.rows, []string{r.Name, fmt.Sprint(r.Checks), r.SHA256, r.Doc})
	}
	return t.writeText(opts.IO.Out)
}

// taskShown is `assay tasks show --format json`: the task file's content with snake_case keys
// throughout (file names and profile names are values, not keys), its SHA-256 and source.
type taskShown struct {
	Name      string          `json:"name"`
	Doc       string          `json:"doc"`
	Source    string          `json:"source"`
	SHA256    string          `json:"sha256"`
	TeamTask  string          `json:"team_task"`
	Package   string          `json:"package"`
	Languages []taskLanguage  `json:"languages"`
	Roles     []taskRole      `json:"roles"`
	Oracle    taskOracleShown `json:"oracle"`
}

type taskLanguage struct {
	Language    string        `json:"language"`
	Function    string        `json:"function"`
	TestCommand string        `json:"test_command"`
	Executor    string        `json:"executor_assignment"`
	Profiles    []taskProfile `json:"profiles"`
}

type taskProfile struct {
	Profile  string     `json:"profile"`
	Files    []string   `json:"files"`
	Artifact string     `json:"artifact"`
	Solution []taskFile `json:"reference_solution"`
}

type taskFile struct {
	File    string `json:"file"`
	SHA256  string `json:"sha256"`
	Content string `json:"content"`
}

type taskRole struct {
	Role       string `json:"role"`
	Assignment string `json:"assignment"`
}

type taskOracleShown struct {
	tasks.OracleSection
	Checks int `json:"checks"`
}

func taskJSON(t *tasks.Task) taskShown {
	out := taskShown{Name: t.Name, Doc: t.Doc, Source: t.File, SHA256: t.SHA256, TeamTask: t.TeamTask, Package: t.Package,
		Oracle: taskOracleShown{OracleSection: t.Oracle}}
	if spec, err := t.Spec(tasks.LanguageGo); err == nil {
		out.Oracle.Checks = spec.Expected()
	}
	for _, lang := range tasks.Languages {
		l := taskLanguage{Language: lang, Function: t.Function[lang], TestCommand: t.TestCommand[lang], Executor: t.Assignment.Executor[lang]}
		for _, prof := range tasks.Profiles {
			p := taskProfile{Profile: prof, Files: t.Files(lang, prof), Artifact: t.Artifact(lang, prof)}
			sol := t.Solution(lang, prof)
			for _, f := range p.Files {
				sum := sha256.Sum256([]byte(sol[f]))
				p.Solution = append(p.Solution, taskFile{File: f, SHA256: hex.EncodeToString(sum[:]), Content: sol[f]})
			}
			l.Profiles = append(l.Profiles, p)
		}
		out.Languages = append(out.Languages, l)
	}
	for _, role := range []string{"supervisor", "critic", "judge", "synthesizer"} {
		text, _ := t.RoleAssignment(role)
		out.Roles = append(out.Roles, taskRole{Role: role, Assignment: text})
	}
	return out
}

func showTask(opts *TasksOptions, format string) error {
	t, err := tasks.Load(opts.Task)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if format == "json" {
		return writeJSON(opts.IO.Out, taskJSON(t))
	}
	w := opts.IO.Out
	fmt.Fprintf(w, "task:     %s (%s)\nsource:   %s\nsha256:   %s\nteam:     %s\n", t.Name, t.Doc, t.File, t.SHA256, strings.ReplaceAll(strings.TrimSpace(t.TeamTask), "\n", " / "))
	for _, lang := range tasks.Languages {
		spec, err := t.Spec(lang)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "%s:\n  function %s; tests: %s\n", lang, spec.Function, t.TestCommand[lang])
		for _, prof := range tasks.Profiles {
			fmt.Fprintf(w, "  %-11s %s (oracle checks %s)\n", prof, strings.Join(t.Files(lang, prof), ", "), t.Artifact(lang, prof))
		}
	}
	spec, _ := t.Spec(tasks.LanguageGo)
	fmt.Fprintf(w, "oracle:   %s\n  reference: go %q, python %q; %d checks\n", spec.Doc, spec.Reference.GoExpr, spec.Reference.PyExpr, spec.Expected())
	fmt.Fprintf(w, "reference solution: what the embedded reference provider writes (it is not a model)\n")
	return nil
}

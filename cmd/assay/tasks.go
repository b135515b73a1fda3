package main

import (
	"context"
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
				"JSON with its SHA-256. Reference: docs/cli.md, docs/tasks.md."),
		Example: "  assay tasks show double\n  assay tasks show tasks/triple.yaml --format json",
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

func showTask(opts *TasksOptions, format string) error {
	t, err := tasks.Load(opts.Task)
	if err != nil {
		return usageErrorf("%v", err)
	}
	if format == "json" {
		return writeJSON(opts.IO.Out, map[string]any{"task": t, "sha256": t.SHA256, "source": t.File})
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

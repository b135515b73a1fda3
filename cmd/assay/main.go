// Command assay audits agentic systems with evidence instead of self-reports: it runs formation
// matrices against OpenAI-compatible providers, records and verifies the evidence, and indexes Go
// codebases. Commands here only parse flags, call a package and print.
//
// Exit codes: 0 success; 1 the thing checked failed (a rejected case, a tampered trace); 2 bad input
// or usage. Errors are one line on stderr.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// version is assay's version, recorded in environment fingerprints and snapshots.
const version = "0.1.0-dev"

// IOStreams are the command's standard streams; tests pass buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

// exitError carries an exit code. Code 1 means the thing checked failed; 2 bad input.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// failed marks an outcome where the checked thing failed (exit 1), with a message for stderr.
func failed(format string, args ...any) error {
	return &exitError{code: 1, err: fmt.Errorf(format, args...)}
}

// badInput marks bad input or usage (exit 2).
func badInput(err error) error {
	var ee *exitError
	if errors.As(err, &ee) {
		return err
	}
	return &exitError{code: 2, err: err}
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}

// run executes the command line and returns the exit code, printing any error as one line.
func run(ctx context.Context, args []string, io IOStreams) int {
	root := NewCmdRoot(io)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	msg := strings.ReplaceAll(strings.TrimSpace(err.Error()), "\n", " ")
	var ee *exitError
	if errors.As(err, &ee) {
		if msg != "" {
			fmt.Fprintln(io.ErrOut, "assay: "+msg)
		}
		return ee.code
	}
	// Flag parsing and unknown commands come back from cobra unwrapped: bad usage.
	fmt.Fprintln(io.ErrOut, "assay: "+msg)
	return 2
}

// NewCmdRoot builds the command tree.
func NewCmdRoot(io IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "assay",
		Short: "Audit agentic systems with evidence instead of self-reports",
		Long: `assay runs multi-agent formations against OpenAI-compatible providers and decides, from
evidence it records itself, whether each case is accepted: deliverables checked by independent tests
and a finite-domain oracle, session ids and usage reconciled against an observing gateway, and every
event hash-chained in a DuckDB evidence store that can be verified later. It also indexes Go codebases
into a code graph.

Start with:  assay matrix run      (on the embedded reference provider)`,
		SilenceUsage:  true,
		SilenceErrors: true,
		Version:       version,
	}
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return badInput(fmt.Errorf("%w (see '%s --help')", err, c.CommandPath()))
	})
	root.AddCommand(NewCmdMatrix(io, nil), NewCmdSQL(io, nil), NewCmdVerify(io, nil), NewCmdIndex(io, nil),
		NewCmdFormations(io, nil), NewCmdOracle(io), NewCmdStore(io, nil), NewCmdExport(io, nil),
		NewCmdMetrics(io, nil), NewCmdGraph(io, nil), NewCmdEffects(io, nil), NewCmdReconcile(io, nil), NewCmdApprove(io, nil), NewCmdProvider(io, nil), NewCmdResume(io, nil), NewCmdReplay(io, nil))
	// cobra adds its `completion` group when the command runs; added now, it
	// is a group like the others below.
	root.InitDefaultCompletionCmd()
	root.SetHelpCommand(newHelpCommand())
	refuseUnknownSubcommands(root)
	return root
}

// refuseUnknownSubcommands makes every command group (a command with subcommands and no action of
// its own, the root included) refuse, as bad input, to run without a subcommand or with an unknown
// one: one line naming the subcommands and the help to read, exit 2, instead of printing help and
// exiting 0 as if something had been done. `--help` still prints the help and exits 0.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if c.HasSubCommands() && c.Run == nil && c.RunE == nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			// A subcommand's name reaches here only after "--", which ends
			// the flags and the command path alike.
			if slices.Contains(availableSubcommands(cmd), args[0]) && cmd.ArgsLenAtDash() == 0 {
				return badInput(fmt.Errorf("%q after '--' is an argument, not a subcommand: put the subcommand before '--' (%s %s ... -- ARG); see '%s --help'",
					args[0], cmd.CommandPath(), args[0], cmd.CommandPath()))
			}
			return badInput(fmt.Errorf("unknown command %q for %q (%s; see '%s --help')",
				args[0], cmd.CommandPath(), subcommandList(cmd), cmd.CommandPath()))
		}
		c.RunE = func(cmd *cobra.Command, args []string) error {
			// run prefixes "assay: "; a group names itself without it.
			what := strings.TrimPrefix(cmd.CommandPath(), "assay ") + ": a subcommand is required"
			if !cmd.HasParent() {
				what = "a command is required"
			}
			return badInput(fmt.Errorf("%s (%s); see '%s --help'", what, strings.Join(availableSubcommands(cmd), ", "), cmd.CommandPath()))
		}
	}
}

// availableSubcommands names the subcommands of c that --help lists, in its order.
func availableSubcommands(c *cobra.Command) []string {
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	return names
}

// subcommandList is "subcommands: a, b" (or "subcommand: a"; "commands: ..." for the root) for an
// error message.
func subcommandList(c *cobra.Command) string {
	names := availableSubcommands(c)
	word := "subcommand"
	if !c.HasParent() {
		word = "command"
	}
	if len(names) != 1 {
		word += "s"
	}
	return word + ": " + strings.Join(names, ", ")
}

// noArgs refuses positional arguments as bad input.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return badInput(fmt.Errorf("%s takes no arguments, got %q", c.CommandPath(), strings.Join(args, " ")))
	}
	return nil
}

// newHelpCommand is `assay help [command]`: the help of a command, and exit
// 2 for a topic that names no command (cobra's own printed the root's help
// and exited 0, as if the topic existed).
func newHelpCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "help [command]",
		Short: "Help about any command",
		Long:  "Help provides help for any command in the application: assay help [path to command].",
		RunE: func(c *cobra.Command, args []string) error {
			cmd, rest, err := c.Root().Find(args)
			if err != nil || cmd == nil || len(rest) > 0 {
				return badInput(fmt.Errorf("unknown help topic %q (see 'assay --help' for the commands)", strings.Join(args, " ")))
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	}
}

// Command assay audits agentic systems with evidence instead of self-reports: it runs formation
// matrices against OpenAI-compatible providers, records and verifies the evidence, and indexes Go
// codebases. Commands here only parse flags, call a package and print.
//
// Exit codes (exitCode decides them from the error's type, in one place): 0 success; 1 the thing
// checked failed (a rejected case, a tampered trace) or the command could not do its work (an I/O
// or store failure); 2 bad input, usage, options, or a lock another process holds. Errors are one
// line on stderr, naming flags where the libraries name option fields.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// version is assay's version, recorded in environment fingerprints and snapshots.
const version = "0.1.0-dev"

// IOStreams are the command's standard streams; tests pass buffers.
type IOStreams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
}

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], IOStreams{In: os.Stdin, Out: os.Stdout, ErrOut: os.Stderr})
	stop()
	os.Exit(code)
}

// run executes the command line and returns the exit code, printing any error as one line. args
// are the arguments after the program name; nil means none (never the process's own os.Args,
// which cobra would read for a nil slice).
func run(ctx context.Context, args []string, io IOStreams) int {
	root := NewCmdRoot(io)
	root.SetArgs(append([]string{}, args...))
	return report(io.ErrOut, root.ExecuteContext(ctx))
}

// NewCmdRoot builds the command tree.
func NewCmdRoot(io IOStreams) *cobra.Command {
	root := newRoot(io)
	root.AddCommand(NewCmdMatrix(io, nil), NewCmdSQL(io, nil), NewCmdVerify(io, nil), NewCmdIndex(io, nil),
		NewCmdFormations(io, nil), NewCmdTasks(io, nil), NewCmdOracle(io), NewCmdStore(io, nil), NewCmdExport(io, nil),
		NewCmdMetrics(io, nil), NewCmdGraph(io, nil), NewCmdEffects(io, nil), NewCmdReconcile(io, nil), NewCmdApprove(io, nil), NewCmdProvider(io, nil), NewCmdGateway(io, nil), NewCmdUsage(io, nil), NewCmdResume(io, nil),
		NewCmdKeygen(io, nil), NewCmdAttest(io, nil), NewCmdReplay(io, nil), NewCmdReport(io, nil), NewCmdAudit(io, nil),
		NewCmdVersion(io, nil))
	finishTree(root)
	return root
}

// newRoot is the root command without its subcommands: what every command inherits in parsing
// (flag errors and flags given empty are bad usage), so that a test parsing one command through
// it parses as assay does.
func newRoot(io IOStreams) *cobra.Command {
	root := &cobra.Command{
		Use:   "assay",
		Short: "Audit agentic systems with evidence instead of self-reports",
		Long: longHelp("0 success; 1 what was checked failed (a case not accepted, a run that does not verify) or the "+
			"command could not do its work (an I/O or store failure); 2 bad input, usage or options, or a store another "+
			"process holds. An error is one line on stderr, naming the flag to fix where there is one.",
			"assay runs multi-agent formations against OpenAI-compatible providers and decides, from evidence it records "+
				"itself, whether each case is accepted: deliverables checked by independent tests and a finite-domain oracle, "+
				"session ids and usage reconciled against an observing gateway, every event hash-chained in a DuckDB evidence "+
				"store that can be verified later. It also indexes Go codebases into a code graph. Reference for every "+
				"command: docs/cli.md.",
			"Start with:\n  assay matrix run      (on the embedded reference provider)"),
		SilenceUsage:  true,
		SilenceErrors: true,
		// A flag given with an empty value is bad usage, not "not given".
		PersistentPreRunE: func(c *cobra.Command, args []string) error { return refuseEmptyFlags(c) },
	}
	setVersionFlag(root)
	root.SetIn(io.In)
	root.SetOut(io.Out)
	root.SetErr(io.ErrOut)
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		if msg := err.Error(); strings.HasPrefix(msg, "unknown flag: --") && strings.ContainsAny(strings.TrimPrefix(msg, "unknown flag: --"), " \n") {
			// An argument that starts with "--" and holds spaces is an SQL comment or a text, not a
			// flag: it must come after "--", which ends the flags.
			return usageErrorf("%q is not a flag: put arguments that start with \"--\" after \"--\" (%s -- '%s')", strings.TrimPrefix(msg, "unknown flag: "),
				c.CommandPath(), strings.TrimPrefix(msg, "unknown flag: "))
		}
		return usageErrorf("%w (see '%s --help')", flagValueError(err), c.CommandPath())
	})
	return root
}

// argCountError is the bad usage of c given n arguments where it takes want ("RUN and CALL"):
// "approve takes RUN and CALL, got 1 argument (see 'assay approve --help')". The command is named
// without the program, which the printed line already starts with.
func argCountError(c *cobra.Command, want string, n int) error {
	s := "s"
	if n == 1 {
		s = ""
	}
	name := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
	return usageErrorf("%s takes %s, got %d argument%s (see '%s --help')", name, want, n, s, c.CommandPath())
}

// withoutPrefix is err with its text's leading package prefix (such as "gateway: ") removed, for a
// message that already names the flag the error is about; errors.Is and errors.As see err's chain
// as before.
func withoutPrefix(err error, prefix string) error {
	if !strings.HasPrefix(err.Error(), prefix) {
		return err
	}
	return prefixless{err: err, text: strings.TrimPrefix(err.Error(), prefix)}
}

type prefixless struct {
	err  error
	text string
}

func (p prefixless) Error() string { return p.text }
func (p prefixless) Unwrap() error { return p.err }

// argsWord is n arguments in words for argCountError: "one argument", "2 arguments".
func argsWord(n int) string {
	if n == 1 {
		return "one argument"
	}
	return fmt.Sprintf("%d arguments", n)
}

// flagValueError rewords pflag's error for a value its flag's type cannot parse (`invalid argument
// "abc" for "--repeat" flag: strconv.ParseInt: parsing "abc": invalid syntax`) as what the value
// should have been (`--repeat "abc": not a whole number`); any other error is returned as it is.
func flagValueError(err error) error {
	var iv *pflag.InvalidValueError
	if !errors.As(err, &iv) {
		return err
	}
	name := "--" + iv.GetFlag().Name
	var ne *strconv.NumError
	if !errors.As(iv, &ne) {
		if typ := iv.GetFlag().Value.Type(); typ == "duration" {
			return fmt.Errorf("%s %q: not a duration (a number with a unit: 90s, 5m, 1h30m)", name, iv.GetValue())
		}
		if cause := errors.Unwrap(iv); cause != nil {
			return fmt.Errorf("%s %q: %v", name, iv.GetValue(), cause)
		}
		return err
	}
	what := "a number"
	switch typ := iv.GetFlag().Value.Type(); {
	case strings.HasPrefix(typ, "int"):
		what = "a whole number"
	case strings.HasPrefix(typ, "uint"):
		what = "a whole number, 0 or more"
	case typ == "bool":
		return fmt.Errorf("%s=%q: not true or false", name, iv.GetValue())
	}
	if errors.Is(ne.Err, strconv.ErrRange) {
		return fmt.Errorf("%s %q: out of range for %s", name, iv.GetValue(), what)
	}
	return fmt.Errorf("%s %q: not %s", name, iv.GetValue(), what)
}

// finishTree completes the tree under root once every command is added: cobra's completion group
// (added now, so that it is a group like the others), completion of flag and argument values, the help command, groups that refuse to run
// without a subcommand, and argument checks that report bad usage.
func finishTree(root *cobra.Command) {
	root.InitDefaultCompletionCmd()
	root.SetHelpCommand(newHelpCommand())
	completeValues(root)
	refuseUnknownSubcommands(root)
	argsAreUsage(root)
}

// argsAreUsage makes every argument check under c report bad usage (exit 2), cobra's own (the
// completion commands') included.
func argsAreUsage(c *cobra.Command) {
	for _, sub := range c.Commands() {
		argsAreUsage(sub)
	}
	if check := c.Args; check != nil {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if err := check(cmd, args); err != nil && !errors.Is(err, errUsage) {
				return &usageError{err: err}
			} else {
				return err
			}
		}
	}
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
				return usageErrorf("%q after '--' is an argument, not a subcommand: put the subcommand before '--' (%s %s ... -- ARG); see '%s --help'",
					args[0], cmd.CommandPath(), args[0], cmd.CommandPath())
			}
			return usageErrorf("unknown command %q for %q (%s; see '%s --help')",
				args[0], cmd.CommandPath(), subcommandList(cmd), cmd.CommandPath())
		}
		c.RunE = func(cmd *cobra.Command, args []string) error {
			// run prefixes "assay: "; a group names itself without it.
			what := strings.TrimPrefix(cmd.CommandPath(), "assay ") + ": a subcommand is required"
			if !cmd.HasParent() {
				what = "a command is required"
			}
			return usageErrorf("%s (%s); see '%s --help'", what, strings.Join(availableSubcommands(cmd), ", "), cmd.CommandPath())
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
		name := strings.TrimPrefix(c.CommandPath(), c.Root().Name()+" ")
		return usageErrorf("%s takes no arguments, got %q (see '%s --help')", name, strings.Join(args, " "), c.CommandPath())
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
				return usageErrorf("unknown help topic %q (see 'assay --help' for the commands)", strings.Join(args, " "))
			}
			cmd.InitDefaultHelpFlag()
			return cmd.Help()
		},
	}
}

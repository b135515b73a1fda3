package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/harness"
)

// buildInfo is what the binary says about its own build: assay's version, and the commit and
// commit time the go command stamped into it (runtime/debug.ReadBuildInfo, settings vcs.revision,
// vcs.time, vcs.modified). Commit, Date and Modified are nil (JSON null: unknown) when the build
// was not stamped (a build with -buildvcs=false, go test, a build outside a repository).
type buildInfo struct {
	Version   string  `json:"version"`
	Commit    *string `json:"commit"`   // full VCS revision
	Date      *string `json:"date"`     // commit time, RFC 3339
	Modified  *bool   `json:"modified"` // built from a work tree with uncommitted changes
	GoVersion string  `json:"go_version"`
}

func readBuildInfo() buildInfo {
	env := harness.CurrentEnvironment(version) // the facts each run's environment fingerprint covers
	b := buildInfo{Version: version, GoVersion: env.Go}
	if env.VCSRevision != "" {
		b.Commit = &env.VCSRevision
	}
	if env.VCSTime != "" {
		b.Date = &env.VCSTime
	}
	b.Modified = env.VCSModified
	return b
}

// String is the one line `assay version` and `assay --version` print: "assay 1.2.3 (commit C,
// committed D, modified, go1.26)", with "unknown" for what the build did not record.
func (b buildInfo) String() string {
	or := func(p *string) string {
		if p == nil {
			return "unknown"
		}
		return *p
	}
	s := fmt.Sprintf("assay %s (commit %s, committed %s", b.Version, or(b.Commit), or(b.Date))
	switch {
	case b.Modified != nil && *b.Modified:
		s += ", modified"
	case b.Modified == nil && b.Commit != nil:
		s += ", modified unknown"
	}
	return s + ", " + b.GoVersion + ")"
}

// VersionOptions are the parsed flags of `assay version`.
type VersionOptions struct {
	IO     IOStreams
	Format string
}

// NewCmdVersion builds `assay version`.
func NewCmdVersion(io IOStreams, runF func(context.Context, *VersionOptions) error) *cobra.Command {
	opts := &VersionOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "version",
		Short: "Print assay's version, and the commit and date it was built from",
		Long: longHelp("0.",
			"Print assay's version and the commit, commit date and Go version it was built with, read from the "+
				"binary's build information (\"unknown\", and null in JSON, when the build was not stamped, e.g. with -buildvcs=false). "+
				"assay --version prints the same line (docs/cli.md)."),
		Args: noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runVersion(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Format, "format", "text", "output format: text or json")
	return cmd
}

func runVersion(_ context.Context, opts *VersionOptions) error {
	format, err := outputFormat(opts.Format, "text", "json")
	if err != nil {
		return err
	}
	b := readBuildInfo()
	if format == "json" {
		return writeJSON(opts.IO.Out, b)
	}
	_, err = fmt.Fprintln(opts.IO.Out, b.String())
	return err
}

// setVersionFlag gives root a --version flag printing buildInfo's line, with no -v shorthand:
// -v is not --version (cobra would add it as one when the root's Version is set).
func setVersionFlag(root *cobra.Command) {
	root.Version = readBuildInfo().String()
	root.SetVersionTemplate("{{.Version}}\n")
	root.Flags().Bool("version", false, "print the version, commit and date (assay version)")
}

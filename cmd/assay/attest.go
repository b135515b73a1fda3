package main

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/evidence/attest"
	"github.com/assay-audit/assay/harness"
)

// AttestOptions are the parsed flags of `assay attest`.
type AttestOptions struct {
	IO     IOStreams
	Store  storeFlags
	Key    string
	Dir    string
	Runs   []string
	Format string
	Wait   time.Duration
}

// NewCmdAttest builds `assay attest --key FILE [RUN...]`.
func NewCmdAttest(io IOStreams, runF func(context.Context, *AttestOptions) error) *cobra.Command {
	opts := &AttestOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "attest --key FILE [RUN...]",
		Short: "Sign each finalized run as an in-toto attestation (DSSE, Ed25519)",
		Long: longHelp("0 every run signed or already signed; 1 a run refused; 2 on bad input (no key, no store).",
			"Verify the evidence store (all runs when none are named), then sign every finalized run that verifies, and "+
				"every interrupted run a later writer sealed, as an in-toto Statement v1 in a DSSE envelope (subjects: the "+
				"terminal hash and artifact digests), written to one new file in --dir. A run already signed there is left; "+
				"one that does not verify, or whose attestation no longer matches, is refused, never re-signed. Sign where the "+
				"store is trusted, as soon as runs are finalized: docs/cli.md, docs/trust.md."),
		Example: `  assay attest --key /secure/assay.key --out assay-out --dir /backup/attestations`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Runs = args
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runAttest(c.Context(), opts)
		},
	}
	opts.Store.register(cmd)
	f := cmd.Flags()
	f.StringVar(&opts.Key, "key", "", "Ed25519 private key (assay keygen)")
	f.StringVar(&opts.Dir, "dir", "", "directory the attestations are written to (default: attestations beside the store)")
	f.StringVar(&opts.Format, "format", "table", "output format: table or json")
	f.DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	return cmd
}

func runAttest(ctx context.Context, opts *AttestOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	if opts.Key == "" {
		return usageErrorf("--key FILE is required: the Ed25519 private key to sign with (assay keygen)")
	}
	signer, err := attest.LoadSigner(opts.Key)
	if err != nil {
		return err
	}
	path := opts.Store.path()
	dir := opts.Dir
	if dir == "" {
		dir = filepath.Join(filepath.Dir(path), "attestations")
	}
	store, err := evidence.Open(ctx, path, evidence.OpenOptions{ReadOnly: true, Wait: opts.Wait, Command: "assay attest"})
	if err != nil {
		return err
	}
	defer store.Close()
	sdir := filepath.Dir(path)
	results, err := store.VerifyWith(ctx, evidence.VerifyRequest{Runs: opts.Runs, Bindings: harness.BindingCheckers(sdir), WorkingCopy: harness.WorkingCopy(sdir)})
	if err != nil {
		return err
	}
	signed, file, err := attest.Sign(ctx, store, signer, dir, results)
	if err != nil {
		return err
	}
	if format == "json" {
		if err := writeJSON(opts.IO.Out, map[string]any{"attestations": nonNilSlice(signed)}); err != nil {
			return err
		}
	} else {
		t := table{header: []string{"RUN", "OUTCOME", "DETAIL"}}
		for _, r := range signed {
			t.rows = append(t.rows, []string{r.RunID, r.Outcome, labelOr(r.Detail, r.File)})
		}
		if err := t.writeText(opts.IO.Out); err != nil {
			return err
		}
		if file != "" {
			fmt.Fprintf(opts.IO.ErrOut, "wrote %s (key %s)\n", file, signer.KeyID())
		}
	}
	var refused []string
	for _, r := range signed {
		if r.Outcome == attest.SignRefused {
			refused = append(refused, r.RunID)
		}
	}
	for _, r := range results {
		if r.RunID == "" && !r.Passed() {
			refused = append(refused, "store "+r.Table+" "+r.Status)
		}
	}
	if len(refused) > 0 {
		return failed("%d not signed: %s", len(refused), strings.Join(refused, ", "))
	}
	if len(signed) == 0 {
		return failed("no finalized run to sign in %s", path)
	}
	return nil
}

package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/evidence/attest"
	"github.com/assay-audit/assay/harness"
)

// VerifyOptions are the parsed flags of `assay verify`.
type VerifyOptions struct {
	IO           IOStreams
	Store        storeFlags
	Format       string
	Runs         []string
	Wait         time.Duration
	Manifest     string
	Write        bool
	Final        bool
	Strict       bool
	SignKey      string
	PubKey       string
	Attestations string
}

// NewCmdVerify builds `assay verify [RUN...]`.
func NewCmdVerify(io IOStreams, runF func(context.Context, *VerifyOptions) error) *cobra.Command {
	opts := &VerifyOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "verify [RUN...]",
		Short: "Recompute every trace's hash chain and terminal hash; report tampering, damage, deleted runs and unsigned ones",
		Long: longHelp("0 when every run verifies (ok or interrupted) and every manifest and attestation check holds; 1 when "+
			"anything does not, or the store is damaged or could not be read; 2 on bad input: no store, an unusable manifest or "+
			"key, a missing attestations directory, --write without --manifest, a store a writer holds.",
			"Recompute each run's hash chain, sequence, event count, terminal hash and artifact digests (all runs when "+
				"none are named) and compare its checks and verdict with its check_recorded and run_finalized events: ok, "+
				"interrupted, tampered, missing_payload, corrupt_payload or damaged; check the store's tables, its chains of "+
				"admissions, finalizations and writer sessions, and the records each run is bound to. The hashes are unkeyed "+
				"(a writer can rewrite the store, or append a run): a manifest (--manifest FILE --write) or signed "+
				"attestations (--attestations DIR --pubkey KEY) kept elsewhere catch that. docs/trust.md, docs/cli.md."),
		Example: `  assay verify
  assay verify --format json run-20261130t101500-0a1b2c3d4e5f
  assay keygen --out /secure/assay.key
  assay verify --manifest /backup/evidence-manifest.json --write --sign-key /secure/assay.key
  assay verify --manifest /backup/evidence-manifest.json --pubkey /secure/assay.key.pub --strict
  assay verify --attestations /backup/attestations --pubkey /secure/assay.key.pub`,
		RunE: func(c *cobra.Command, args []string) error {
			opts.Runs = args
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runVerify(c.Context(), opts)
		},
	}
	opts.Store.register(cmd)
	f := cmd.Flags()
	f.StringVar(&opts.Format, "format", "table", "output format: table or json")
	f.DurationVar(&opts.Wait, "wait", 0, "wait up to this long for a writer holding the store (e.g. 30s)")
	f.StringVar(&opts.Manifest, "manifest", "", "check the store against this manifest (a checkpoint of its logs and every run's terminal hash)")
	f.BoolVar(&opts.Write, "write", false, "with --manifest: write the manifest instead of checking it")
	f.BoolVar(&opts.Final, "final", false, "with --manifest --write: the store is complete; any run added later fails the check")
	f.BoolVar(&opts.Strict, "strict", false, "with --manifest: fail on any run, finalization or writer session added since the manifest")
	f.StringVar(&opts.SignKey, "sign-key", "", "with --manifest --write: sign the manifest with this Ed25519 private key (assay keygen)")
	f.StringVar(&opts.PubKey, "pubkey", "", "Ed25519 public key the manifest must be signed with and the attestations are checked against")
	f.StringVar(&opts.Attestations, "attestations", "", "directory of signed attestations every finalized run must have one in (needs --pubkey)")
	return cmd
}

func runVerify(ctx context.Context, opts *VerifyOptions) error {
	format, err := outputFormat(opts.Format, "table", "json")
	if err != nil {
		return err
	}
	switch {
	case opts.Write && opts.Manifest == "":
		return usageErrorf("--write needs --manifest FILE")
	case (opts.Final || opts.SignKey != "") && !opts.Write:
		return usageErrorf("--final and --sign-key apply to a manifest being written: add --manifest FILE --write")
	case opts.Strict && (opts.Manifest == "" || opts.Write):
		return usageErrorf("--strict applies to a manifest being checked: add --manifest FILE")
	case opts.Attestations != "" && opts.PubKey == "":
		return usageErrorf("--attestations needs --pubkey: the public key the runs were signed with")
	case opts.PubKey != "" && opts.Attestations == "" && (opts.Manifest == "" || opts.Write):
		return usageErrorf("--pubkey checks signatures of a manifest being checked or of attestations: add --manifest FILE or --attestations DIR")
	}
	vo := harness.VerifyOptions{Runs: opts.Runs, Wait: opts.Wait, Command: "assay verify", Manifest: opts.Manifest,
		WriteManifest: opts.Write, Final: opts.Final, Strict: opts.Strict, Attestations: opts.Attestations}
	if opts.SignKey != "" {
		s, err := attest.LoadSigner(opts.SignKey)
		if err != nil {
			return keyFlagError("--sign-key", err)
		}
		vo.SignKey = s
	}
	if opts.PubKey != "" {
		v, err := attest.LoadVerifier(opts.PubKey)
		if err != nil {
			return keyFlagError("--pubkey", err)
		}
		vo.PubKey = v
	}
	rep, err := harness.VerifyStore(ctx, opts.Store.path(), vo)
	if errors.Is(err, evidence.ErrManifestRefused) {
		// What does not verify is shown; the refusal says no manifest was written.
		if perr := printVerification(opts.IO.Out, format, opts, rep.Results); perr != nil {
			return perr
		}
		return failed("%v", err)
	}
	if err != nil {
		return err
	}
	if err := printVerification(opts.IO.Out, format, opts, rep.Results); err != nil {
		return err
	}
	if opts.Write {
		signed := "unsigned"
		if rep.ManifestSigned {
			signed = "signed"
		}
		fmt.Fprintf(opts.IO.ErrOut, "wrote manifest %s (%s): %d runs pinned\n", opts.Manifest, signed, rep.ManifestRuns)
	}
	if len(rep.Results) == 0 {
		return failed("no runs to verify in %s", opts.Store.path())
	}
	if bad := rep.Failures(); len(bad) > 0 {
		return failed("%d of %d entries do not verify: %s", len(bad), len(rep.Results), strings.Join(bad, "; "))
	}
	return nil
}

func printVerification(w io.Writer, format string, opts *VerifyOptions, results []evidence.RunVerification) error {
	if format == "json" {
		return writeJSON(w, map[string]any{"runs": nonNilSlice(results)})
	}
	manifest := opts.Manifest != "" && !opts.Write
	attested := opts.Attestations != ""
	header := []string{"RUN", "STATUS", "FIRST BAD SEQ"}
	if manifest {
		header = append(header, "MANIFEST")
	}
	if attested {
		header = append(header, "ATTESTATION")
	}
	t := table{header: append(header, "DETAIL")}
	for _, r := range results {
		seq := "-"
		if r.FirstBadSeq > 0 {
			seq = fmt.Sprint(r.FirstBadSeq)
		}
		run := r.RunID
		if run == "" || r.Table != "" {
			// A finding about the store, not a run: named by its table and row.
			run = "(store"
			if r.Table != "" {
				run += " " + r.Table
			}
			if r.Row != "" {
				run += " " + r.Row
			}
			run += ")"
		}
		row := []string{run, r.Status, seq}
		if manifest {
			row = append(row, labelOr(r.Manifest, "-"))
		}
		if attested {
			row = append(row, labelOr(r.Attestation, "-"))
		}
		detail := r.Detail
		for _, n := range r.Notes {
			detail += " [note: " + n + "]"
		}
		t.rows = append(t.rows, append(row, detail))
	}
	return t.writeText(w)
}

func labelOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}

package main

import (
	"context"
	"fmt"

	"github.com/spf13/cobra"

	"github.com/assay-audit/assay/evidence/attest"
)

// KeygenOptions are the parsed flags of `assay keygen`.
type KeygenOptions struct {
	IO  IOStreams
	Out string
}

// NewCmdKeygen builds `assay keygen --out FILE`.
func NewCmdKeygen(io IOStreams, runF func(context.Context, *KeygenOptions) error) *cobra.Command {
	opts := &KeygenOptions{IO: io}
	cmd := &cobra.Command{
		Use:   "keygen --out FILE",
		Short: "Create an Ed25519 key pair for signing attestations and manifests",
		Long: longHelp("0 written; 2 on bad input (no --out, a file already there).",
			"Write a new Ed25519 key pair: the private key to FILE (PKCS #8 PEM, mode 0600), the public key to FILE.pub "+
				"(PKIX PEM). Sign with the private key (attest --key, matrix run --sign-key, verify --manifest --write "+
				"--sign-key), check with the public one (verify --pubkey). Keep the private key where whoever can write the "+
				"evidence store cannot read it (docs/trust.md, docs/cli.md). An existing file is never overwritten."),
		Example: `  assay keygen --out /secure/assay.key`,
		Args:    noArgs,
		RunE: func(c *cobra.Command, args []string) error {
			if runF != nil {
				return runF(c.Context(), opts)
			}
			return runKeygen(c.Context(), opts)
		},
	}
	cmd.Flags().StringVar(&opts.Out, "out", "", "file the private key is written to; the public key goes to FILE.pub")
	return cmd
}

func runKeygen(_ context.Context, opts *KeygenOptions) error {
	if opts.Out == "" {
		return usageErrorf("--out FILE is required: where to write the private key")
	}
	pub, id, err := attest.Keygen(opts.Out)
	if err != nil {
		return err
	}
	fmt.Fprintf(opts.IO.Out, "private key: %s (keep it apart from the evidence)\npublic key:  %s\nkey id:      %s\n", opts.Out, pub, id)
	return nil
}

package attest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
)

// BenchmarkAttest1000 measures signing and then checking the attestations of 1,000 finalized runs
// (store reads, statements, Ed25519 signatures, the file write; the store's own Verify is not
// included: its results are taken once). The store is built through the API first, which takes a
// while. Run it alone:
//
//	go test -run '^$' -bench BenchmarkAttest1000 -benchtime 1x ./evidence/attest/
func BenchmarkAttest1000(b *testing.B) {
	const runs = 1000
	ctx := context.Background()
	ids := make([]string, runs)
	for i := range ids {
		ids[i] = fmt.Sprintf("run-%04d", i)
	}
	build := time.Now()
	f := newFixture(b, ids...)
	b.Logf("built a store of %d finalized runs in %v", runs, time.Since(build).Round(time.Millisecond))
	s, vs := verified(b, f.store)
	signer, err := LoadSigner(f.key)
	if err != nil {
		b.Fatal(err)
	}
	v, err := LoadVerifier(f.pub)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("sign", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			dir := filepath.Join(b.TempDir(), "attestations")
			start := time.Now()
			res, file, err := Sign(ctx, s, signer, dir, vs)
			d := time.Since(start)
			if err != nil || file == "" || len(res) != runs || res[runs-1].Outcome != SignSigned {
				b.Fatalf("Sign: %d results, %s, %v", len(res), file, err)
			}
			b.ReportMetric(d.Seconds(), "s/1000runs")
		}
	})
	dir := filepath.Join(b.TempDir(), "attestations")
	if _, _, err := Sign(ctx, s, signer, dir, vs); err != nil {
		b.Fatal(err)
	}
	b.Run("check", func(b *testing.B) {
		for i := 0; i < b.N; i++ {
			start := time.Now()
			out, err := Check(ctx, s, v, dir, vs, true)
			d := time.Since(start)
			if err != nil || len(out) != runs {
				b.Fatalf("Check: %d results, %v", len(out), err)
			}
			for _, r := range out {
				if r.Attestation != evidence.AttestationVerified {
					b.Fatalf("%s: %s %s", r.RunID, r.Attestation, r.Detail)
				}
			}
			b.ReportMetric(d.Seconds(), "s/1000runs")
		}
	})
	_ = os.RemoveAll(dir)
}

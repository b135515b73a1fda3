package attest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/atomicfile"
)

// SignResult is what Sign did for one run.
type SignResult struct {
	RunID string `json:"run_id"`
	// Outcome is "signed", "already_signed" (an attestation in the directory
	// verifies and matches), or "refused" (Detail says why: the run does not
	// verify, is not finalized, or an attestation for it no longer matches).
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
	File    string `json:"file,omitempty"` // where its attestation was written
}

// Sign outcomes (SignResult.Outcome).
const (
	SignSigned        = "signed"
	SignAlreadySigned = "already_signed"
	SignRefused       = "refused"
)

// Sign signs every run of results (Store.Verify's output) that is finalized
// or sealed and passes verification, and writes the attestations into dir
// (created when missing) as one new file, "attest-<UTC time>-<n>.intoto.jsonl"
// with one envelope per line, written atomically. A run whose attestation in
// dir verifies and still matches is left as it is; a run that does not pass
// verification, or whose existing attestation no longer matches its evidence
// (the evidence changed since it was signed), is refused, never (re)signed.
// Runs not finalized are skipped. src is the store the results came from.
//
// Sign signs what the store holds: run it where the store is trusted, right
// after the runs were finalized (matrix run --sign-key does so per run), not
// on a store that may have been rewritten since.
//
// Errors: I/O errors writing dir; database errors. Refusals are results.
func Sign(ctx context.Context, src runSource, s *Signer, dir string, results []evidence.RunVerification) ([]SignResult, string, error) {
	c, err := loadCatalog(ctx, src)
	if err != nil {
		return nil, "", err
	}
	existing, err := readDir(ctx, dir, s.Verifier())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, "", err
	}
	var out []SignResult
	var lines [][]byte
	for _, res := range results {
		if res.RunID == "" {
			continue
		}
		r, ok := c.byID[res.RunID]
		if !ok || r.TerminalHash == "" {
			continue
		}
		refuse := func(format string, args ...any) {
			out = append(out, SignResult{RunID: r.RunID, Outcome: SignRefused, Detail: fmt.Sprintf(format, args...)})
		}
		if !res.Passed() {
			refuse("the run does not verify (%s: %s)", res.Status, res.Detail)
			continue
		}
		st, err := c.statement(r)
		if err != nil {
			refuse("%v", err)
			continue
		}
		if prior := existing.byRun[r.RunID]; len(prior) > 0 {
			if d := compare(prior, st); d != "" {
				refuse("an attestation for it in %s no longer matches its evidence (%s): the evidence changed since it was signed", dir, d)
			} else {
				out = append(out, SignResult{RunID: r.RunID, Outcome: SignAlreadySigned, File: prior[0].file})
			}
			continue
		}
		line, err := s.signStatement(ctx, st)
		if err != nil {
			return nil, "", err
		}
		lines = append(lines, line)
		out = append(out, SignResult{RunID: r.RunID, Outcome: SignSigned})
	}
	if len(lines) == 0 {
		return out, "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("attest: %w", err)
	}
	name, err := newFileName(dir, "attest")
	if err != nil {
		return nil, "", err
	}
	if err := atomicfile.Write(name, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
		return nil, "", err
	}
	for i := range out {
		if out[i].Outcome == SignSigned {
			out[i].File = name
		}
	}
	return out, name, nil
}

// SignRun signs one finalized or sealed run of src and writes its attestation
// to dir/<run id>.intoto.jsonl (created when missing; refused when it exists):
// what matrix run --sign-key does right after each finalization.
func SignRun(ctx context.Context, src runSource, s *Signer, dir, runID string) (string, error) {
	c, err := loadCatalogFor(ctx, src, runID)
	if err != nil {
		return "", err
	}
	r, ok := c.byID[runID]
	if !ok {
		return "", fmt.Errorf("attest: run %s: %w", runID, evidence.ErrNoRun)
	}
	st, err := c.statement(r)
	if err != nil {
		return "", err
	}
	line, err := s.signStatement(ctx, st)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("attest: %w", err)
	}
	name := filepath.Join(dir, runID+FileSuffix)
	if _, err := os.Lstat(name); err == nil {
		return "", fmt.Errorf("attest: %s exists: an attestation is never replaced", name)
	}
	if err := atomicfile.Write(name, append(line, '\n'), 0o644); err != nil {
		return "", err
	}
	return name, nil
}

// newFileName returns a file name in dir no file has: prefix-<UTC time>-<n>.intoto.jsonl.
func newFileName(dir, prefix string) (string, error) {
	stamp := time.Now().UTC().Format("20060102t150405")
	for n := 1; n < 10000; n++ {
		name := filepath.Join(dir, fmt.Sprintf("%s-%s-%d%s", prefix, stamp, n, FileSuffix))
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return name, nil
		}
	}
	return "", fmt.Errorf("attest: no free file name in %s", dir)
}

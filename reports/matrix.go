package reports

import (
	"bytes"
	"context"
	"fmt"

	"github.com/assay-audit/assay/evidence"
)

// WriteMatrixMarkdown writes the matrix report of runs runIDs to path (Markdown, atomically:
// WriteFileAtomic), with r.Runs read back from the evidence store at r.StorePath, opened
// read-only: the report says what the store holds, never what the process that wrote it believed.
// r.Runs is replaced.
//
// Errors: evidence.Open's (evidence.ErrNoStore, evidence.ErrLocked, ...); evidence.ErrNoRun for a
// run the store lacks; the file system's errors writing path, naming it.
func WriteMatrixMarkdown(ctx context.Context, path string, r MatrixReport, runIDs []string) error {
	store, err := evidence.Open(ctx, r.StorePath, evidence.OpenOptions{ReadOnly: true, Command: "matrix report"})
	if err != nil {
		return err
	}
	defer store.Close()
	r.Runs = nil
	for _, id := range runIDs {
		run, err := store.Run(ctx, id)
		if err != nil {
			return err
		}
		r.Runs = append(r.Runs, run)
	}
	var buf bytes.Buffer
	if err := Markdown(&buf, r); err != nil {
		return err
	}
	if err := WriteFileAtomic(path, buf.Bytes()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

package reports

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/evidence"
)

func TestMarkdownSaysWhatTheEvidenceSays(t *testing.T) {
	known := int64(918)
	fin := time.Date(2026, 11, 30, 10, 0, 0, 0, time.UTC)
	runs := []evidence.RunSummary{
		{RunID: "run-a", Status: "finalized", CreatedAt: fin, Envelope: evidence.Envelope{Formation: "sequential", Mode: "live"},
			Verdict: &evidence.Verdict{Verdict: "accepted"},
			Usage: []evidence.UsageRow{{MemberID: "exec-1", SessionID: "run-a-exec-1", Source: "wire", State: "reported", Requests: 2,
				PromptTokens: &known, CompletionTokens: &known, TotalTokens: &known}}},
		{RunID: "run-b", Status: "finalized", CreatedAt: fin, Envelope: evidence.Envelope{Formation: "parallel", Mode: "live"},
			Verdict: &evidence.Verdict{Verdict: "rejected", Reasons: []string{"usage unknown: exec-2 reported none"}},
			Usage:   []evidence.UsageRow{{MemberID: "exec-2", SessionID: "run-b-exec-2", Source: "wire", State: "unknown", Requests: 2}}},
		{RunID: "run-c", Status: "open", CreatedAt: fin},
	}
	var buf bytes.Buffer
	if err := Markdown(&buf, MatrixReport{Provider: "reference", Model: "assay-reference-1", Reference: true, Runs: runs}); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		"**Reference results.**",              // results from the reference provider are labelled
		"cases: 3, accepted: 1",               // only what the store says was accepted
		"usage unknown: exec-2 reported none", // rejection reasons are shown
		"| exec-2 | `run-b-exec-2` | wire | unknown | 2 | unknown | unknown | unknown |", // NULL is unknown, never 0
		"not finalized", // an open run is not shown with a verdict
	} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	buf.Reset()
	if err := Markdown(&buf, MatrixReport{Provider: "http://x/v1", Model: "m", Runs: runs[:1]}); err != nil {
		t.Fatal(err)
	}
	if strings.Contains(buf.String(), "Reference results") {
		t.Error("a live provider's report is labelled as reference results")
	}
}

func TestWriteFileAtomicReplacesWhole(t *testing.T) {
	path := filepath.Join(t.TempDir(), "report.md")
	for _, content := range []string{"first\n", "second, longer\n"} {
		if err := WriteFileAtomic(path, []byte(content)); err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(path)
		if err != nil || string(got) != content {
			t.Fatalf("read %q %v, want %q", got, err, content)
		}
	}
	entries, _ := os.ReadDir(filepath.Dir(path))
	if len(entries) != 1 {
		t.Fatalf("temporary files left behind: %v", entries)
	}
}

// The report file is built from what the store holds: a run's verdict as finalized there.
func TestWriteMatrixMarkdownReadsTheRunsBackFromTheStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	storePath := filepath.Join(dir, "evidence.duckdb")
	s, err := evidence.Open(ctx, storePath, evidence.OpenOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	env := evidence.Envelope{Tenant: "t", ManifestDigest: strings.Repeat("a", 64), Mode: "live", EnvironmentFingerprint: strings.Repeat("b", 64),
		Formation: "sequential"}
	if err := s.OpenRun(ctx, "run-a", env, ""); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCheck(ctx, "run-a", evidence.Check{Name: "usage", Required: true, Status: "unknown"}); err != nil {
		t.Fatal(err)
	}
	// The writer claims accepted; the store decides rejected (a required check is unknown).
	if _, err := s.Finalize(ctx, "run-a", evidence.Verdict{Verdict: "accepted"}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	path := filepath.Join(dir, "report.md")
	r := MatrixReport{Provider: "reference", Model: "assay-reference-1", Reference: true, StorePath: storePath,
		Runs: []evidence.RunSummary{{RunID: "run-a", Verdict: &evidence.Verdict{Verdict: "accepted"}}}}
	if err := WriteMatrixMarkdown(ctx, path, r, []string{"run-a"}); err != nil {
		t.Fatal(err)
	}
	out, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(out), "cases: 1, accepted: 0") || !strings.Contains(string(out), "**Reference results.**") {
		t.Fatalf("report.md does not say what the store holds:\n%s", out)
	}
	if err := WriteMatrixMarkdown(ctx, path, r, []string{"run-none"}); !errors.Is(err, evidence.ErrNoRun) {
		t.Fatalf("a run the store lacks: %v, want evidence.ErrNoRun", err)
	}
	r.StorePath = filepath.Join(dir, "none.duckdb")
	if err := WriteMatrixMarkdown(ctx, path, r, []string{"run-a"}); !errors.Is(err, evidence.ErrNoStore) {
		t.Fatalf("no store: %v, want evidence.ErrNoStore", err)
	}
}

package evidence

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
)

func digestOf(s string) string { return digestOfBytes([]byte(s)) }

func digestOfBytes(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func testEnvelope(mode string) Envelope {
	return Envelope{
		Tenant:                 "tenant-a",
		ManifestDigest:         digestOf("manifest"),
		Mode:                   mode,
		PolicyDigest:           digestOf("policy"),
		DatasetDigest:          "",
		EnvironmentFingerprint: digestOf("go1.26.8 linux/amd64 assay-dev"),
		EntropySources:         []string{"provider.sampling", "clock"},
		ReplayTolerance:        "exact",
		Provider:               "reference",
		BaseURL:                "http://127.0.0.1:0/v1",
		Model:                  "assay-reference-1",
		Formation:              "pipeline",
		TaskProfile:            "go-double",
		Language:               "go",
	}
}

func i64(v int64) *int64 { return &v }

// storePath returns a fresh store path under its own temp dir.
func storePath(t testing.TB) string {
	t.Helper()
	return filepath.Join(t.TempDir(), "assay-out", "evidence.duckdb")
}

func mustOpen(t testing.TB, path string, opts OpenOptions) *Store {
	t.Helper()
	s, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("Open(%s, %+v): %v", path, opts, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func mustClose(t testing.TB, s *Store) {
	t.Helper()
	if err := s.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}
}

func payload(format string, args ...any) json.RawMessage {
	return json.RawMessage(fmt.Sprintf(format, args...))
}

// largeData returns n deterministic bytes that are not valid UTF-8.
func largeData(n int, seed byte) []byte {
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(i*31) ^ seed
	}
	b[0] = 0xff
	return b
}

// rawExec edits a closed store's file directly, as an attacker or a broken
// tool would, through its own DuckDB handle.
func rawExec(t *testing.T, path string, stmts ...string) {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatalf("raw open %s: %v", path, err)
	}
	defer db.Close()
	for _, st := range stmts {
		if _, err := db.Exec(st); err != nil {
			t.Fatalf("raw exec %q: %v", st, err)
		}
	}
}

func wantFieldError(t *testing.T, err error, kind error, field string) {
	t.Helper()
	if !errors.Is(err, kind) {
		t.Fatalf("error %v is not %v", err, kind)
	}
	var fe *FieldError
	if !errors.As(err, &fe) {
		t.Fatalf("error %v is not a *FieldError", err)
	}
	if fe.Field != field {
		t.Fatalf("FieldError.Field = %q, want %q (error: %v)", fe.Field, field, err)
	}
}

func contains(haystack []string, needle string) bool {
	for _, h := range haystack {
		if h == needle {
			return true
		}
	}
	return false
}

func errorsIs(err, target error) bool { return errors.Is(err, target) }

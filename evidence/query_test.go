package evidence

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/gofrs/flock"
)

func fileDigest(t *testing.T, path string) [32]byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(b)
}

func TestQueryReadOnly(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	w := mustOpen(t, path, OpenOptions{})
	if err := w.OpenRun(ctx, "r1", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Query(ctx, "SELECT 1"); !errors.Is(err, ErrNotReadOnly) {
		t.Errorf("Query on a writable store: %v, want ErrNotReadOnly", err)
	}
	mustClose(t, w)
	before := fileDigest(t, path)
	dir := t.TempDir()
	copyTarget := filepath.Join(dir, "out.csv")
	attachTarget := filepath.Join(dir, "other.duckdb")

	ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
	res, err := ro.Query(ctx, `SELECT r.run_id, e.mode, r.status FROM runs r JOIN envelopes e USING (run_id)`)
	if err != nil {
		t.Fatalf("SELECT: %v", err)
	}
	if strings.Join(res.Columns, ",") != "run_id,mode,status" || len(res.Rows) != 1 ||
		res.Rows[0][0] != "r1" || res.Rows[0][1] != "live" || res.Rows[0][2] != "open" {
		t.Fatalf("SELECT result = %+v", res)
	}
	refused := []string{
		`INSERT INTO runs (run_id, ordinal, status, envelope_digest, created_at) VALUES ('x', 9, 'open', '', now())`,
		`UPDATE runs SET status = 'finalized'`,
		`DELETE FROM events`,
		`CREATE TABLE evil (a INTEGER)`,
		`DROP TABLE events`,
		`COPY (SELECT 1) TO '` + copyTarget + `'`,
		`ATTACH '` + attachTarget + `' AS other`,
		`INSTALL httpfs`,
		`LOAD httpfs`,
		`SET enable_external_access = true`,
		`SET lock_configuration = false`,
		`SELECT * FROM read_csv('` + path + `.lock')`,
	}
	for _, q := range refused {
		// A refusal is the statement's fault, not the store's: ErrBadQuery.
		if _, err := ro.Query(ctx, q); !errors.Is(err, ErrBadQuery) {
			t.Errorf("Query(%q) on a read-only store: %v, want ErrBadQuery", q, err)
		}
	}
	if _, err := ro.Query(ctx, "SELECT 1; SELECT 2"); !errors.Is(err, ErrMultipleStatements) || !errors.Is(err, ErrBadQuery) {
		t.Errorf("two statements: %v, want ErrMultipleStatements and ErrBadQuery", err)
	}
	if _, err := ro.Query(ctx, "SELECT 1 / 0::INTEGER, 'x'::INTEGER"); !errors.Is(err, ErrBadQuery) {
		t.Errorf("a failing conversion: %v, want ErrBadQuery", err)
	}
	if _, err := ro.Query(ctx, "SET lock_configuration = false; COPY (SELECT 1) TO '"+copyTarget+"'"); err == nil {
		t.Errorf("multi-statement escape succeeded")
	}
	if _, err := ro.Query(ctx, "SELEC 1"); !errors.Is(err, ErrBadQuery) || errors.Is(err, ErrMultipleStatements) {
		t.Errorf("syntax error reported as %v", err)
	}
	// The store still answers after the refusals.
	if res, err := ro.Query(ctx, "SELECT count(*) FROM runs"); err != nil || res.Rows[0][0] != int64(1) {
		t.Errorf("count after refusals = %+v, %v", res, err)
	}
	mustClose(t, ro)
	for _, p := range []string{copyTarget, attachTarget} {
		if _, err := os.Stat(p); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("%s exists after refused statements: %v", p, err)
		}
	}
	if fileDigest(t, path) != before {
		t.Errorf("store file changed under a read-only Query")
	}
}

func TestOpenRefusesNonStores(t *testing.T) {
	ctx := context.Background()
	cases := []struct {
		name  string
		setup func(t *testing.T, path string)
		check func(t *testing.T, err error)
	}{
		{"text file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte("these are not the droids\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrNotStore) {
				t.Fatalf("%v, want ErrNotStore", err)
			}
		}},
		{"empty file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, nil, 0o644); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "(0 bytes, shorter than its header)") {
				t.Fatalf("%v, want ErrNotStore saying the file has 0 bytes", err)
			}
		}},
		{"a directory", func(t *testing.T, path string) {
			if err := os.Mkdir(path, 0o755); err != nil {
				t.Fatal(err)
			}
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrNotStore) || !strings.Contains(err.Error(), "is a directory, not a DuckDB database") {
				t.Fatalf("%v, want ErrNotStore saying it is a directory", err)
			}
		}},
		{"duckdb without meta", func(t *testing.T, path string) {
			rawExec(t, path, `CREATE TABLE people (name VARCHAR)`, `INSERT INTO people VALUES ('ada')`)
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrNotStore) {
				t.Fatalf("%v, want ErrNotStore", err)
			}
		}},
		{"duckdb with another app's meta", func(t *testing.T, path string) {
			rawExec(t, path, `CREATE TABLE meta (key VARCHAR, value VARCHAR)`, `INSERT INTO meta VALUES ('app', 'other'), ('schema_version', '1')`)
		}, func(t *testing.T, err error) {
			if !errors.Is(err, ErrNotStore) {
				t.Fatalf("%v, want ErrNotStore", err)
			}
		}},
		{"newer schema", func(t *testing.T, path string) {
			mustClose(t, mustOpen(t, path, OpenOptions{}))
			rawExec(t, path, `UPDATE meta SET value = '99' WHERE key = 'schema_version'`)
		}, func(t *testing.T, err error) {
			var se *SchemaVersionError
			if !errors.As(err, &se) || !errors.Is(err, ErrSchemaVersion) || se.Found != 99 || se.Supported != SchemaVersion {
				t.Fatalf("%v, want *SchemaVersionError{Found: 99, Supported: %d}", err, SchemaVersion)
			}
			if !strings.Contains(err.Error(), "99") || !strings.Contains(err.Error(), fmt.Sprintf("version %d", SchemaVersion)) {
				t.Fatalf("message %q does not name both versions", err)
			}
		}},
	}
	for _, tc := range cases {
		for _, ro := range []bool{false, true} {
			name := tc.name + "/writer"
			if ro {
				name = tc.name + "/reader"
			}
			t.Run(name, func(t *testing.T) {
				path := filepath.Join(t.TempDir(), "evidence.duckdb")
				tc.setup(t, path)
				digest := func() [32]byte {
					if fi, err := os.Stat(path); err == nil && fi.IsDir() {
						return [32]byte{'d', 'i', 'r'}
					}
					return fileDigest(t, path)
				}
				before := digest()
				s, err := Open(ctx, path, OpenOptions{ReadOnly: ro})
				if err == nil {
					s.Close()
					t.Fatal("Open succeeded")
				}
				tc.check(t, err)
				if digest() != before {
					t.Errorf("refused file was modified")
				}
				// The refusal released the lock.
				fl := flock.New(path + ".lock")
				if ok, err := fl.TryLock(); !ok || err != nil {
					t.Errorf("lock still held after the refusal: %v", err)
				}
				_ = fl.Unlock()
			})
		}
	}
	t.Run("missing file read-only", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "nope.duckdb")
		_, err := Open(ctx, path, OpenOptions{ReadOnly: true})
		var ns *NoStoreError
		if !errors.Is(err, ErrNoStore) || !errors.Is(err, fs.ErrNotExist) || !errors.As(err, &ns) || ns.Path != path {
			t.Fatalf("%v, want a *NoStoreError naming %s (ErrNoStore, fs.ErrNotExist)", err, path)
		}
		if _, err := os.Stat(path); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("read-only Open created %s", path)
		}
	})
	t.Run("path through a file read-only", func(t *testing.T) {
		// Not a missing store but a path that cannot be looked up: not ErrNoStore.
		file := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Open(ctx, filepath.Join(file, "evidence.duckdb"), OpenOptions{ReadOnly: true})
		if err == nil || errors.Is(err, ErrNoStore) || errors.Is(err, fs.ErrNotExist) {
			t.Fatalf("%v, want an error that is neither ErrNoStore nor fs.ErrNotExist", err)
		}
	})
	t.Run("empty duckdb is initialised by a writer", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "evidence.duckdb")
		rawExec(t, path, `SELECT 1`)
		if _, err := Open(ctx, path, OpenOptions{ReadOnly: true}); !errors.Is(err, ErrNotStore) {
			t.Fatalf("reader on an empty DuckDB file: %v, want ErrNotStore", err)
		}
		mustClose(t, mustOpen(t, path, OpenOptions{}))
		mustClose(t, mustOpen(t, path, OpenOptions{ReadOnly: true}))
	})
}

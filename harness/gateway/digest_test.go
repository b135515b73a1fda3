package gateway

import (
	"database/sql"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/internal/sqliteuri"
)

// Every column of the requests table is covered by the digest a gateway binding records: an edit to
// any one of them, in one row, changes DigestRecords of the rows read back. The columns are read
// from the database itself (PRAGMA table_info), so a column added later is covered by this test
// too. Row form 1 (bindings recorded before echoed_session was covered) leaves out that column
// alone.
func TestEveryRequestsColumnIsInTheDigest(t *testing.T) {
	path := twoRecords(t)
	digests := func(t *testing.T) (string, string) {
		recs, err := ReadRecords(t.Context(), path, 0, 10, "run-1-")
		if err != nil || len(recs) != 2 {
			t.Fatalf("read back %d records: %v", len(recs), err)
		}
		v2, err := DigestRecords(recs)
		if err != nil {
			t.Fatal(err)
		}
		v1, err := DigestRecordsForm(recs, 1)
		if err != nil {
			t.Fatal(err)
		}
		return v2, v1
	}
	db, err := sql.Open("sqlite3", sqliteuri.File(path, "mode=rw"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.QueryContext(t.Context(), `SELECT name, type FROM pragma_table_info('requests') ORDER BY cid`)
	if err != nil {
		t.Fatal(err)
	}
	type column struct{ name, typ string }
	var cols []column
	for rows.Next() {
		var col column
		if err := rows.Scan(&col.name, &col.typ); err != nil {
			t.Fatal(err)
		}
		cols = append(cols, col)
	}
	if err := rows.Err(); err != nil || len(cols) < 23 {
		t.Fatalf("requests has %d columns (%v)", len(cols), err)
	}
	for _, col := range cols {
		if col.name == "id" {
			continue // the row's key: an edited id leaves the locator's window or renumbers the rows
		}
		t.Run(col.name, func(t *testing.T) {
			before2, before1 := digests(t)
			edit := map[string]string{"INTEGER": "%s + 1", "REAL": "%s + 0.25", "TEXT": "%s || 'x'"}[col.typ]
			switch col.name {
			case "stream":
				edit = "1 - %s"
			case "started_at": // still a time the reader parses, a second later
				edit = "replace(%s, '01:02:03', '01:02:04')"
			case "usage_state":
				edit = "CASE %s WHEN 'reported' THEN 'unknown' ELSE 'reported' END"
			}
			if edit == "" {
				t.Fatalf("no edit for type %s", col.typ)
			}
			q := `UPDATE requests SET ` + col.name + ` = ` + strings.ReplaceAll(edit, "%s", col.name) + ` WHERE id = 2`
			restore := `UPDATE requests SET ` + col.name + ` = (SELECT ` + col.name + ` FROM requests WHERE id = 1) WHERE id = 2`
			if _, err := db.ExecContext(t.Context(), q); err != nil {
				t.Fatalf("%s: %v", q, err)
			}
			defer func() {
				if _, err := db.ExecContext(t.Context(), restore); err != nil {
					t.Fatal(err)
				}
			}()
			after2, after1 := digests(t)
			if after2 == before2 {
				t.Errorf("%s edited: DigestRecords did not change", col.name)
			}
			if (after1 == before1) != (col.name == "echoed_session") {
				t.Errorf("%s edited: row form 1 digest changed %v, want changed unless echoed_session", col.name, after1 != before1)
			}
		})
	}
	if _, err := DigestRecordsForm(nil, 3); err == nil {
		t.Fatal("row form 3 was read")
	}
}

// twoRecords writes a usage database of two records of session run-1-exec and returns its path.
func twoRecords(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "gw.db")
	s, err := openStore(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	s.startWriter()
	p, c := int64(3), int64(4)
	for i := range 2 {
		rec := Record{ID: s.reserveID(), SessionID: "run-1-exec", Method: "POST", Path: "/v1/chat/completions", Model: "m", Stream: i == 1,
			Status: 200, LatencyMS: 1.5, RequestSHA256: strings.Repeat("a", 64), ResponseSHA256: strings.Repeat("b", 64),
			RequestBytes: 120, ResponseBytes: 1100, UsageState: UsageReported, PromptTokens: &p, CompletionTokens: &c,
			TotalTokens: &c, CachedTokens: &p, ReasoningTokens: &p, RelayError: "", StartedAt: time.Date(2026, 12, 2, 1, 2, 3, 4000, time.UTC),
			AnsweredModel: "m", ResponseDecodedSHA256: strings.Repeat("c", 64), EchoedSession: "run-1-exec"}
		errs := make(chan error, 1)
		s.enqueue(&rec, func(err error) { errs <- err })
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if err := s.close(); err != nil {
		t.Fatal(err)
	}
	return path
}

// A usage database a reader cannot take at its word is said in its terms: which record's
// started_at is not a stored time, or that the meta table records no schema version; never Go's
// time layout or database/sql's "no rows in result set".
func TestUnreadableUsageDatabasesAreSaidInTheirTerms(t *testing.T) {
	for _, c := range []struct{ name, stmt, want string }{
		{"started_at edited", `UPDATE requests SET started_at = started_at || 'x' WHERE id = 2`, `record 2 in `},
		{"meta emptied", `DELETE FROM meta`, "its meta table records no schema_version"},
		{"meta dropped", `DROP TABLE meta`, "its meta table cannot be read (no such table: meta)"},
	} {
		t.Run(c.name, func(t *testing.T) {
			path := twoRecords(t)
			db, err := sql.Open("sqlite3", sqliteuri.File(path, "mode=rw"))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := db.ExecContext(t.Context(), c.stmt); err != nil {
				t.Fatal(err)
			}
			db.Close()
			_, err = ReadRecords(t.Context(), path, 0, 10, "run-1-")
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Fatalf("err %v, want it to say %q", err, c.want)
			}
			for _, leak := range []string{"2006-01-02", "no rows in result set", "parsing time"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("%v says %q", err, leak)
				}
			}
		})
	}
}

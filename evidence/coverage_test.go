package evidence

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
)

// coverageStore writes a store whose rows fill every column of the schema: run "int", opened and
// left open by a writer that closed; run "cov", correcting it, with events, an inline artifact,
// checks with evidence, usage rows and calls with every count, usage verdicts, a checkpoint and a
// binding, finalized; the second writer's first write sealed "int" (a status change, a verdict,
// a finalization).
func coverageStore(t testing.TB) string {
	t.Helper()
	path := storePath(t)
	writeCoverageStore(t, path)
	return path
}

// writeCoverageStore writes coverageStore's store at path.
func writeCoverageStore(t testing.TB, path string) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	s := mustOpen(t, path, OpenOptions{Command: "first writer"})
	must(s.OpenRun(ctx, "int", testEnvelope(ModeLive), ""))
	_, err := s.AppendEvent(ctx, "int", Event{Type: "step", MemberID: "m1", SessionID: "int-m1", Payload: payload(`{"i":1}`)})
	must(err)
	mustClose(t, s)

	s = mustOpen(t, path, OpenOptions{Command: "second writer"})
	env := testEnvelope(ModeLive)
	env.DatasetDigest = digestOf("dataset")
	must(s.OpenRun(ctx, "cov", env, "int"))
	for i := 1; i <= 3; i++ {
		_, err := s.AppendEvent(ctx, "cov", Event{Type: "step", MemberID: "m1", SessionID: "cov-m1", Parent: int64(i - 1), Payload: payload(`{"i":%d}`, i)})
		must(err)
	}
	_, err = s.PutArtifact(ctx, "cov", "deliverable/m1/a.go", "text/x-go", []byte("package a\n"))
	must(err)
	n := func(v int64) *int64 { return &v }
	calls := []UsageCall{}
	for _, src := range []string{SourceWire, SourceStore, SourceGateway} {
		calls = append(calls, UsageCall{Source: src, CallID: "cov-m1/1", SessionID: "cov-m1", MemberID: "m1", RequestSHA256: digestOf("req"),
			Messages: n(2), PromptTokens: n(10), CompletionTokens: n(5), TotalTokens: n(15), CachedTokens: n(1), ReasoningTokens: n(2)})
	}
	// A call only the wire saw, so that its source can change without taking another's key.
	calls = append(calls, UsageCall{Source: SourceWire, CallID: "cov-m3/1", SessionID: "cov-m3", MemberID: "m3", RequestSHA256: digestOf("req3"),
		Messages: n(1), PromptTokens: n(1), CompletionTokens: n(1), TotalTokens: n(2), CachedTokens: n(0), ReasoningTokens: n(0)})
	must(s.RecordUsageCalls(ctx, "cov", calls...))
	row := UsageRow{MemberID: "m2", SessionID: "cov-m2", Source: SourceGateway, State: UsageReported, Requests: 1,
		PromptTokens: n(3), CompletionTokens: n(4), TotalTokens: n(7), CachedTokens: n(0), ReasoningTokens: n(0)}
	must(s.RecordUsage(ctx, "cov", row))
	vs := ReconcileUsageCalls(calls, []UsageRow{row})
	for i := range vs {
		vs[i].Duplicated, vs[i].Multiple = true, 2
	}
	must(s.RecordUsageVerdicts(ctx, "cov", vs))
	_, err = s.SaveCheckpoint(ctx, "cov", 2, json.RawMessage(`{"round":1}`))
	must(err)
	must(s.BindExternal(ctx, "cov", Binding{Source: "gateway", Locator: json.RawMessage(`{"file":"gateway-usage.db"}`), Records: 3, SHA256: digestOf("recs")}))
	must(s.RecordCheck(ctx, "cov", Check{Name: "tests", Required: true, Status: CheckPassed, Detail: "ok", Evidence: json.RawMessage(`{"exit":0}`)}))
	_, err = s.Finalize(ctx, "cov", Verdict{Verdict: VerdictRejected, Reasons: []string{"coverage"}})
	must(err)
	mustClose(t, s)
}

// alternatives are values tried, in order, for a text column a CHECK constraint restricts.
var alternatives = []string{"finalized", "open", "interrupted", "failed", "passed", "unknown", "wire", "store", "gateway",
	"reported", "partial", "accepted", "rejected", "non_certifiable", "conserved", "mismatch", "dry_run", "observe", "live", "file", "inline"}

// columnEdits are the UPDATE statements that change column col (of SQL type typ) of one row of
// table, tried in order until one changes a row: of run "cov" where the table has a run_id column
// (hasRunID), else the first row.
func columnEdits(t *testing.T, table, col, typ string, hasRunID bool) []string {
	t.Helper()
	// One row: of run "cov" where it has one there, else the first.
	prefer := "run_id = 'cov'"
	if table == "usage_calls" {
		prefer = "call_id = 'cov-m3/1'"
	}
	where := fmt.Sprintf(`rowid = coalesce((SELECT min(rowid) FROM "%s" WHERE %s), (SELECT min(rowid) FROM "%s"))`, table, prefer, table)
	if !hasRunID {
		where = fmt.Sprintf(`rowid = (SELECT min(rowid) FROM "%s")`, table)
	}
	q := func(expr string) string {
		return fmt.Sprintf(`UPDATE "%s" SET "%s" = %s WHERE %s AND "%s" IS DISTINCT FROM %s`, table, col, expr, where, col, expr)
	}
	var candidates []string
	switch {
	case typ == "JSON":
		candidates = []string{`'{"edited":true}'`}
	case typ == "VARCHAR":
		candidates = []string{`coalesce("` + col + `", '') || 'x'`}
		for _, a := range alternatives {
			candidates = append(candidates, "'"+a+"'")
		}
	case typ == "BIGINT" || typ == "INTEGER":
		candidates = []string{`coalesce("` + col + `", 0) + 1000003`}
	case typ == "BOOLEAN":
		candidates = []string{`NOT coalesce("` + col + `", false)`}
	case typ == "TIMESTAMP":
		candidates = []string{`coalesce("` + col + `", TIMESTAMP '2020-01-01') + INTERVAL 1 SECOND`}
	case typ == "VARCHAR[]":
		candidates = []string{`list_append(coalesce("` + col + `", []::VARCHAR[]), 'x')`}
	case typ == "BLOB":
		candidates = []string{`"` + col + `" || 'x'::BLOB`}
	default:
		t.Fatalf("%s.%s: no edit for type %s", table, col, typ)
	}
	stmts := make([]string, len(candidates))
	for i, c := range candidates {
		stmts[i] = q(c)
	}
	return stmts
}

// editColumn changes column col of table (columnEdits) in the closed store at path, committed to
// the file through a DuckDB handle of its own as an attacker would, and reports whether some value
// changed.
func editColumn(t *testing.T, path, table, col, typ string, hasRunID bool) bool {
	t.Helper()
	db := openRaw(t, path)
	defer db.Close()
	for _, stmt := range columnEdits(t, table, col, typ, hasRunID) {
		res, err := db.Exec(stmt)
		if err != nil {
			continue
		}
		if n, _ := res.RowsAffected(); n > 0 {
			return true
		}
	}
	return false
}

// editColumnInTx changes column col of table (columnEdits), as editColumn does, inside a
// transaction begun on s's own connection, which it leaves open so that s.Verify reads the edited
// rows; the caller rolls it back. Each candidate that fails or changes nothing is rolled back
// before the next, as a failed statement ends a DuckDB transaction. It reports whether some value
// changed (false: no transaction is open).
func editColumnInTx(t *testing.T, s *Store, table, col, typ string, hasRunID bool) bool {
	t.Helper()
	ctx := context.Background()
	for _, stmt := range columnEdits(t, table, col, typ, hasRunID) {
		if _, err := s.conn.ExecContext(ctx, `BEGIN TRANSACTION`); err != nil {
			t.Fatal(err)
		}
		res, err := s.conn.ExecContext(ctx, stmt)
		if err == nil {
			if n, _ := res.RowsAffected(); n > 0 {
				return true
			}
		}
		if _, err := s.conn.ExecContext(ctx, `ROLLBACK`); err != nil {
			t.Fatal(err)
		}
	}
	return false
}

// coverageColumn is a column of the schema TestEveryColumnIsCovered edits.
type coverageColumn struct {
	table, name, typ string
	runID            bool // the table has a run_id column
}

// coverageColumns lists every column of the schema but meta's, in table and column order.
func coverageColumns(t *testing.T, s *Store) []coverageColumn {
	t.Helper()
	rows, err := s.conn.QueryContext(context.Background(), `SELECT table_name, column_name, data_type,
			(SELECT count(*) FROM duckdb_columns() c2 WHERE c2.table_name = c.table_name AND c2.column_name = 'run_id' AND c2.database_name = c.database_name)
		FROM duckdb_columns() c WHERE database_name = current_database() AND schema_name = 'main' AND table_name <> 'meta'
		ORDER BY table_name, column_index`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var cols []coverageColumn
	for rows.Next() {
		var c coverageColumn
		var n int
		if err := rows.Scan(&c.table, &c.name, &c.typ, &n); err != nil {
			t.Fatal(err)
		}
		c.runID = n > 0
		cols = append(cols, c)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return cols
}

// failedFindings lists the findings of vs that do not pass.
func failedFindings(vs []RunVerification) []string {
	var failed []string
	for _, v := range vs {
		if !v.Passed() {
			failed = append(failed, v.RunID+v.Table+" "+v.Status)
		}
	}
	return failed
}

// Every column of the schema is covered: changing any value of any column of a run's rows, of the
// store-wide chains or of the writer sessions makes verify fail. Only meta, which identifies the
// file (checked by Open) and not a run, is outside.
//
// Each column is edited inside a transaction on the connection Verify reads through, verified and
// rolled back, all on one copy of the coverage store. The control columns (one of each type, and
// the run status) are also edited the way an attacker would, committed to a copy of the file of
// their own and verified through a read-only store: those findings must equal the in-transaction
// ones, so that what Verify sees of an uncommitted edit is what it sees of a committed one.
func TestEveryColumnIsCovered(t *testing.T) {
	if testing.Short() {
		t.Skip("one verification per column (about 170); skipped with -short")
	}
	ctx := context.Background()
	src := storeCopy(t, "coverageStore", func(t *testing.T, path string) { writeCoverageStore(t, path) })
	if got := verifyAll(t, src); got["cov"].Status != VerifyOK || got["int"].Status != VerifyInterrupted {
		t.Fatalf("the coverage store does not verify: %+v", got)
	}
	data, err := os.ReadFile(src)
	if err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, src, OpenOptions{})
	cols := coverageColumns(t, s)
	if len(cols) < 150 {
		t.Fatalf("only %d columns", len(cols))
	}
	control := map[string]bool{"runs.status": true}
	seenType := map[string]bool{}
	for _, c := range cols {
		if !seenType[c.typ] {
			seenType[c.typ] = true
			control[c.table+"."+c.name] = true
		}
	}
	for _, c := range cols {
		t.Run(c.table+"."+c.name, func(t *testing.T) {
			if !editColumnInTx(t, s, c.table, c.name, c.typ, c.runID) {
				t.Fatalf("no edit of %s.%s (%s) took", c.table, c.name, c.typ)
			}
			vs, err := s.Verify(ctx)
			if _, err := s.conn.ExecContext(ctx, `ROLLBACK`); err != nil {
				t.Fatal(err)
			}
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if len(failedFindings(vs)) == 0 {
				t.Fatalf("an edit of %s.%s goes unnoticed: %+v", c.table, c.name, vs)
			}
			if !control[c.table+"."+c.name] {
				return
			}
			path := filepath.Join(t.TempDir(), "evidence.duckdb")
			if err := os.WriteFile(path, data, 0o644); err != nil {
				t.Fatal(err)
			}
			if !editColumn(t, path, c.table, c.name, c.typ, c.runID) {
				t.Fatalf("no committed edit of %s.%s (%s) took", c.table, c.name, c.typ)
			}
			ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
			committed, err := ro.Verify(ctx)
			mustClose(t, ro)
			if err != nil {
				t.Fatalf("Verify: %v", err)
			}
			if !reflect.DeepEqual(committed, vs) {
				t.Fatalf("an edit of %s.%s verifies differently in a transaction and committed:\n in a transaction %+v\n committed        %+v", c.table, c.name, vs, committed)
			}
			// Verifying every run reads each table once for all runs; verifying one run by name
			// reads that run alone. Both must find the same for each run.
			for _, v := range committed {
				if v.RunID == "" {
					continue
				}
				if alone := verifyAll(t, path, v.RunID)[v.RunID]; !reflect.DeepEqual(alone, v) {
					t.Fatalf("after an edit of %s.%s run %s verifies differently alone and among all runs:\n alone %+v\n all   %+v", c.table, c.name, v.RunID, alone, v)
				}
			}
		})
	}
	// Every edit was rolled back: the store verifies as it did.
	vs, err := s.Verify(ctx)
	if err != nil || len(failedFindings(vs)) != 0 {
		t.Fatalf("after the edits were rolled back: %v %+v", err, vs)
	}
	if len(control) < 6 {
		t.Fatalf("only %d control columns: %v", len(control), control)
	}
}

// The tables terminal hash version 5 covers are listed with every column but run_id.
func TestTerminalTablesCoverEveryColumn(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	for _, tt := range terminalTables() {
		rows, err := s.conn.QueryContext(ctx, `SELECT column_name FROM duckdb_columns() WHERE database_name = current_database()
			AND schema_name = 'main' AND table_name = ? ORDER BY column_index`, tt.name)
		if err != nil {
			t.Fatal(err)
		}
		var cols []string
		for rows.Next() {
			var c string
			if err := rows.Scan(&c); err != nil {
				t.Fatal(err)
			}
			if c != "run_id" && !(tt.name == "artifacts" && c == "data") {
				cols = append(cols, c)
			}
		}
		rows.Close()
		got := slices.Clone(tt.cols)
		slices.Sort(got)
		slices.Sort(cols)
		if strings.Join(got, ",") != strings.Join(cols, ",") {
			t.Errorf("terminal hash v5 covers %s columns %v, the table has %v", tt.name, got, cols)
		}
	}
}

// openRaw opens a closed store's file through its own DuckDB handle, as an attacker would.
func openRaw(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("duckdb", path)
	if err != nil {
		t.Fatal(err)
	}
	return db
}

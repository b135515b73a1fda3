package evidence

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// appendAdmission chains the admission of a run to the end of the store's
// admissions chain inside tx: a.PrevHash becomes the last admission's hash
// (ZeroHash for the first) and a.Hash its AdmissionHash. a.Ordinal must be
// above every stored ordinal. It returns a as stored.
func appendAdmission(ctx context.Context, tx *sql.Tx, a Admission) (Admission, error) {
	a.PrevHash = ZeroHash
	var last int64
	var prev string
	err := tx.QueryRowContext(ctx, `SELECT ordinal, hash FROM admissions ORDER BY ordinal DESC LIMIT 1`).Scan(&last, &prev)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return Admission{}, fmt.Errorf("evidence: admit run %s: %w", a.RunID, err)
	default:
		if !isDigest(prev) {
			return Admission{}, fmt.Errorf("evidence: admit run %s: stored hash of admission %d is not SHA-256 hex; run assay verify", a.RunID, last)
		}
		if a.Ordinal <= last {
			return Admission{}, fmt.Errorf("evidence: admit run %s: ordinal %d is not after admission %d", a.RunID, a.Ordinal, last)
		}
		a.PrevHash = prev
	}
	a.AdmittedAt = utcMicro(a.AdmittedAt)
	h, err := AdmissionHash(a.PrevHash, a)
	if err != nil {
		return Admission{}, err
	}
	a.Hash = h
	if _, err := tx.ExecContext(ctx, `INSERT INTO admissions (ordinal, run_id, envelope_digest, corrects_run_id, admitted_at, backfilled, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, a.Ordinal, a.RunID, a.EnvelopeDigest, a.CorrectsRunID, a.AdmittedAt, a.Backfilled, a.PrevHash, a.Hash); err != nil {
		return Admission{}, fmt.Errorf("evidence: admit run %s: %w", a.RunID, err)
	}
	return a, nil
}

// backfillAdmissions chains an admission, marked Backfilled, for every run of
// a store being migrated to schema v3, in runs.ordinal order and keeping each
// run's ordinal, so a gap left by a run deleted before the migration stays
// visible as a gap in the admission ordinals.
func backfillAdmissions(ctx context.Context, tx *sql.Tx) error {
	rows, err := tx.QueryContext(ctx, `SELECT ordinal, run_id, envelope_digest, coalesce(corrects_run_id, ''), created_at FROM runs ORDER BY ordinal`)
	if err != nil {
		return fmt.Errorf("backfill admissions: %w", err)
	}
	var as []Admission
	for rows.Next() {
		a := Admission{Backfilled: true}
		if err := rows.Scan(&a.Ordinal, &a.RunID, &a.EnvelopeDigest, &a.CorrectsRunID, &a.AdmittedAt); err != nil {
			rows.Close()
			return fmt.Errorf("backfill admissions: %w", err)
		}
		as = append(as, a)
	}
	if err := rows.Close(); err != nil {
		return fmt.Errorf("backfill admissions: %w", err)
	}
	for _, a := range as {
		if a.Ordinal < 1 {
			return fmt.Errorf("backfill admissions: run %s has ordinal %d; schema v2 never wrote one below 1", a.RunID, a.Ordinal)
		}
		if _, err := appendAdmission(ctx, tx, a); err != nil {
			return fmt.Errorf("backfill admissions: %w", err)
		}
	}
	return nil
}

// loadAdmission returns run runID's admission, or nil when it has none.
func loadAdmission(ctx context.Context, q queryer, runID string) (*Admission, error) {
	a := &Admission{}
	err := q.QueryRowContext(ctx, `SELECT ordinal, run_id, envelope_digest, corrects_run_id, admitted_at, backfilled, prev_hash, hash
		FROM admissions WHERE run_id = ?`, runID).Scan(&a.Ordinal, &a.RunID, &a.EnvelopeDigest, &a.CorrectsRunID, &a.AdmittedAt,
		&a.Backfilled, &a.PrevHash, &a.Hash)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: load admission of run %s: %w", runID, err)
	}
	a.AdmittedAt = a.AdmittedAt.UTC()
	return a, nil
}

// admissionFindings checks one run's admission against its runs row: it
// exists, records the run's ordinal, envelope digest, correction and creation
// time, and hashes (AdmissionHash) to its stored hash. Where it stands in the
// chain is storeFindings' concern.
func admissionFindings(re *runEvidence) []finding {
	a := re.admission
	if a == nil {
		return []finding{{VerifyTampered, "no admission record: the store-wide admissions chain lacks the run"}}
	}
	var diffs []string
	if a.Ordinal != re.ordinal {
		diffs = append(diffs, fmt.Sprintf("ordinal %d (runs.ordinal %d)", a.Ordinal, re.ordinal))
	}
	if a.EnvelopeDigest != re.summary.EnvelopeDigest {
		diffs = append(diffs, "envelope digest")
	}
	if a.CorrectsRunID != re.summary.CorrectsRunID {
		diffs = append(diffs, fmt.Sprintf("corrected run %q (runs.corrects_run_id %q)", a.CorrectsRunID, re.summary.CorrectsRunID))
	}
	if !a.AdmittedAt.Equal(re.summary.CreatedAt) {
		diffs = append(diffs, "admission time (runs.created_at)")
	}
	var out []finding
	if len(diffs) > 0 {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("admission %d differs from the runs row in %s", a.Ordinal, strings.Join(diffs, ", "))})
	}
	if h, err := AdmissionHash(a.PrevHash, *a); err != nil || h != a.Hash {
		out = append(out, finding{VerifyTampered, fmt.Sprintf("admission %d: hash mismatch", a.Ordinal)})
	}
	return out
}

// storeFindings checks what no single run holds: that the admissions and
// finalizations chains run 1..n without a gap with each prev_hash linking to
// its predecessor (findings keyed by the run whose entry breaks it); that no
// table holds rows of a run missing from runs (orphans) and no run corrects
// a run missing from runs (missing: one tampered RunVerification per such
// run id, in admission order, then by id); and that the writer sessions form
// their chain, pin prefixes of the other two chains, and hold the runs that
// name them (storeLevel: one tampered entry per writer whose record breaks;
// run findings keyed by run). Must be called with s.mu held.
func (s *Store) storeFindings(ctx context.Context) (chain map[string][]finding, missing, storeLevel []RunVerification, err error) {
	chain = map[string][]finding{}
	rows, err := s.conn.QueryContext(ctx, `SELECT ordinal, run_id, prev_hash, hash, backfilled FROM admissions ORDER BY ordinal`)
	if err != nil {
		return nil, nil, nil, fmt.Errorf("evidence: verify admissions: %w", err)
	}
	expected, prevHash, prevOrdinal := int64(1), ZeroHash, int64(0)
	firstLive := int64(0) // first admission written by OpenRun rather than backfilled
	admitted := map[string]int64{}
	for rows.Next() {
		var ord int64
		var runID, prev, hash string
		var backfilled bool
		if err := rows.Scan(&ord, &runID, &prev, &hash, &backfilled); err != nil {
			rows.Close()
			return nil, nil, nil, fmt.Errorf("evidence: verify admissions: %w", err)
		}
		admitted[runID] = ord
		// The migration backfills before any run is admitted live, so the
		// backfilled admissions are a prefix of the chain.
		if backfilled && firstLive > 0 {
			chain[runID] = append(chain[runID], finding{VerifyTampered, fmt.Sprintf(
				"admission %d is marked backfilled, but admission %d before it was written by OpenRun: only the migration backfills, before any run is admitted", ord, firstLive)})
		}
		if !backfilled && firstLive == 0 {
			firstLive = ord
		}
		switch {
		case ord > expected && ord == expected+1:
			chain[runID] = append(chain[runID], finding{VerifyTampered, fmt.Sprintf(
				"admission %d: admission %d is missing: the run admitted there was deleted", ord, expected)})
		case ord > expected:
			chain[runID] = append(chain[runID], finding{VerifyTampered, fmt.Sprintf(
				"admission %d: admissions %d..%d are missing: the runs admitted there were deleted", ord, expected, ord-1)})
		case prev != prevHash:
			what := "the chain's start"
			if prevOrdinal > 0 {
				what = fmt.Sprintf("admission %d", prevOrdinal)
			}
			chain[runID] = append(chain[runID], finding{VerifyTampered, fmt.Sprintf(
				"admission %d: prev_hash does not link to %s: an admission before it was deleted or edited", ord, what)})
		}
		expected, prevHash, prevOrdinal = ord+1, hash, ord
	}
	if err := rows.Close(); err != nil {
		return nil, nil, nil, fmt.Errorf("evidence: verify admissions: %w", err)
	}
	if missing, err = s.missingRuns(ctx, admitted); err != nil {
		return nil, nil, nil, err
	}
	fins, err := loadFinalizations(ctx, s.conn)
	if err != nil {
		return nil, nil, nil, err
	}
	for id, fs := range finalizationChainFindings(fins) {
		chain[id] = append(chain[id], fs...)
	}
	writers, err := loadWriters(ctx, s.conn)
	if err != nil {
		return nil, nil, nil, err
	}
	adms, err := admissionHashes(ctx, s.conn)
	if err != nil {
		return nil, nil, nil, err
	}
	storeLevel = writerChainFindings(writers, adms, fins)
	orphans, err := s.unlinkedArtifacts(ctx)
	if err != nil {
		return nil, nil, nil, err
	}
	storeLevel = append(storeLevel, orphans...)
	byRun, err := s.runWriterFindings(ctx, writers)
	if err != nil {
		return nil, nil, nil, err
	}
	for id, fs := range byRun {
		chain[id] = append(chain[id], fs...)
	}
	return chain, missing, storeLevel, nil
}

// missingRuns finds run ids that some table (any table with a run_id column
// other than runs) or some run's corrects_run_id still names although runs
// has no row for them: evidence of a run that was deleted. admitted maps run
// ids to their admission ordinal.
func (s *Store) missingRuns(ctx context.Context, admitted map[string]int64) ([]RunVerification, error) {
	trows, err := s.conn.QueryContext(ctx, `SELECT table_name FROM duckdb_columns()
		WHERE database_name = current_database() AND schema_name = 'main' AND column_name = 'run_id' AND table_name <> 'runs'
		ORDER BY table_name`)
	if err != nil {
		return nil, fmt.Errorf("evidence: verify: list tables: %w", err)
	}
	var tables []string
	for trows.Next() {
		var t string
		if err := trows.Scan(&t); err != nil {
			trows.Close()
			return nil, fmt.Errorf("evidence: verify: list tables: %w", err)
		}
		tables = append(tables, t)
	}
	if err := trows.Close(); err != nil {
		return nil, fmt.Errorf("evidence: verify: list tables: %w", err)
	}
	left, err := s.orphanRows(ctx, tables)
	if err != nil {
		return nil, err
	}
	rows, err := s.conn.QueryContext(ctx, `SELECT corrects_run_id, run_id FROM runs
		WHERE corrects_run_id IS NOT NULL AND corrects_run_id NOT IN (SELECT run_id FROM runs) ORDER BY ordinal`)
	if err != nil {
		return nil, fmt.Errorf("evidence: verify: corrected runs: %w", err)
	}
	named := map[string][]string{} // missing run id -> runs correcting it
	for rows.Next() {
		var missing, by string
		if err := rows.Scan(&missing, &by); err != nil {
			rows.Close()
			return nil, fmt.Errorf("evidence: verify: corrected runs: %w", err)
		}
		named[missing] = append(named[missing], by)
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("evidence: verify: corrected runs: %w", err)
	}
	out := map[string]RunVerification{}
	for id := range left {
		out[id] = RunVerification{}
	}
	for id := range named {
		out[id] = RunVerification{}
	}
	for id := range out {
		var parts []string
		if len(left[id]) > 0 {
			parts = append(parts, "rows for it remain in "+strings.Join(left[id], ", "))
		}
		if len(named[id]) > 0 {
			parts = append(parts, "runs.corrects_run_id of "+strings.Join(named[id], ", ")+" names it")
		}
		detail := fmt.Sprintf("run %s is missing from runs, but %s: the run was deleted", id, strings.Join(parts, "; "))
		if ord, ok := admitted[id]; ok {
			detail = fmt.Sprintf("%s (admission %d)", detail, ord)
		}
		out[id] = RunVerification{RunID: id, Status: VerifyTampered, Detail: detail}
	}
	list := make([]RunVerification, 0, len(out))
	for _, v := range out {
		list = append(list, v)
	}
	// Admitted runs in admission order, then runs never admitted, by id.
	sort.Slice(list, func(i, j int) bool {
		oi, ai := admitted[list[i].RunID]
		oj, aj := admitted[list[j].RunID]
		switch {
		case ai != aj:
			return ai
		case oi != oj:
			return oi < oj
		}
		return list[i].RunID < list[j].RunID
	})
	return list, nil
}

// unlinkedArtifacts reports artifacts rows no run links: PutArtifact stores
// the row and its link in one transaction, so such a row was added by hand,
// or is what remains of a run whose links were deleted.
func (s *Store) unlinkedArtifacts(ctx context.Context) ([]RunVerification, error) {
	rows, err := s.conn.QueryContext(ctx, `SELECT digest FROM artifacts WHERE digest NOT IN (SELECT digest FROM run_artifacts) ORDER BY digest LIMIT 100`)
	if err != nil {
		return nil, fmt.Errorf("evidence: verify artifacts: %w", err)
	}
	defer rows.Close()
	var out []RunVerification
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return nil, fmt.Errorf("evidence: verify artifacts: %w", err)
		}
		out = append(out, RunVerification{Status: VerifyTampered, Table: "artifacts", Row: "digest=" + d,
			Detail: fmt.Sprintf("artifact sha256:%s is linked by no run: it was added, or the links of the run that stored it were deleted", d)})
	}
	return out, rows.Err()
}

// orphanRows counts, for each of tables, its rows whose run_id is missing from runs, by run id:
// "table (n)" per table, in the order of tables. All tables are read in one statement; only when
// that fails is each read on its own, so that the error names the table.
func (s *Store) orphanRows(ctx context.Context, tables []string) (map[string][]string, error) {
	left := map[string][]string{} // run id -> "table (n)"
	if len(tables) == 0 {
		return left, nil
	}
	queries := make([]string, len(tables))
	for i, t := range tables {
		// Table names come from the catalog; quoting keeps any name literal.
		queries[i] = `SELECT ` + strconv.Itoa(i) + ` AS i, run_id, count(*) FROM "` + strings.ReplaceAll(t, `"`, `""`) + `"
			WHERE run_id NOT IN (SELECT run_id FROM runs) GROUP BY run_id`
	}
	read := func(query, what string) error {
		rows, err := s.conn.QueryContext(ctx, query)
		if err != nil {
			return fmt.Errorf("evidence: verify: orphan rows of %s: %w", what, err)
		}
		for rows.Next() {
			var i int
			var id sql.NullString
			var n int64
			if err := rows.Scan(&i, &id, &n); err != nil {
				rows.Close()
				return fmt.Errorf("evidence: verify: orphan rows of %s: %w", what, err)
			}
			left[id.String] = append(left[id.String], fmt.Sprintf("%s (%d)", tables[i], n))
		}
		if err := rows.Close(); err != nil {
			return fmt.Errorf("evidence: verify: orphan rows of %s: %w", what, err)
		}
		return nil
	}
	// Every table's run ids in one stream, against runs once: one anti-join and one grouping
	// instead of one of each per table.
	ids := make([]string, len(tables))
	for i, t := range tables {
		ids[i] = `SELECT ` + strconv.Itoa(i) + ` AS i, run_id FROM "` + strings.ReplaceAll(t, `"`, `""`) + `"`
	}
	if read(`SELECT i, run_id, count(*) FROM (`+strings.Join(ids, " UNION ALL ")+`)
		WHERE run_id NOT IN (SELECT run_id FROM runs) GROUP BY i, run_id ORDER BY i, run_id`, "every table") == nil {
		return left, nil
	}
	clear(left)
	for i, t := range tables {
		if err := read(queries[i]+` ORDER BY run_id`, t); err != nil {
			return nil, err
		}
	}
	return left, nil
}

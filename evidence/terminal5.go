package evidence

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// TerminalV5 (schema v5) replaces the selected fields of versions 1 to 3 by
// every column of every row the run owns in the tables below, so that no
// column a report or a verdict reads is outside the hash (recorded_at,
// linked_at, created_at, ordinals, the writer, the finalization time, the
// status, the bindings to records outside the store). See TerminalHash.
const TerminalV5 = 5

// terminalTable is one table whose rows of a run terminal hash v5 covers:
// the columns in order (run_id is implied), which of them are JSON, and the
// query selecting the run's rows in key order ($1 is the run id).
type terminalTable struct {
	name  string
	cols  []string
	json  map[string]bool
	where string // the rest of the query after FROM <name>
}

// terminalTables lists, by name, every table terminal hash v5 covers besides
// runs, verdicts and events (covered through their own fields and the event
// chain) and envelopes (covered by the envelope digest).
// TestTerminalTablesCoverEveryColumn keeps the lists equal to the schema.
func terminalTables() []terminalTable {
	return []terminalTable{
		{name: "artifacts", cols: []string{"digest", "size", "storage", "created_at"},
			where: `WHERE digest IN (SELECT digest FROM run_artifacts WHERE run_id = $1) ORDER BY digest`},
		{name: "checkpoints", cols: []string{"seq", "state", "hash", "created_at", "event_hash"},
			json: map[string]bool{"state": true}, where: `WHERE run_id = $1 ORDER BY seq`},
		{name: "checks", cols: []string{"name", "required", "status", "detail", "evidence", "recorded_at"},
			json: map[string]bool{"evidence": true}, where: `WHERE run_id = $1 ORDER BY name`},
		{name: "run_artifacts", cols: []string{"name", "digest", "media_type", "linked_at"},
			where: `WHERE run_id = $1 ORDER BY name`},
		{name: "run_bindings", cols: []string{"source", "locator", "records", "sha256", "recorded_at"},
			json: map[string]bool{"locator": true}, where: `WHERE run_id = $1 ORDER BY source`},
		{name: "run_status_changes", cols: []string{"ordinal", "from_status", "to_status", "reason", "writer_id", "changed_at"},
			where: `WHERE run_id = $1 ORDER BY ordinal`},
		{name: "usage", cols: []string{"ordinal", "member_id", "session_id", "source", "state", "requests", "prompt_tokens",
			"completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens", "recorded_at"},
			where: `WHERE run_id = $1 ORDER BY ordinal`},
		{name: "usage_calls", cols: []string{"source", "call_id", "observation", "session_id", "member_id", "request_sha256",
			"messages", "state", "prompt_tokens", "completion_tokens", "total_tokens", "cached_tokens", "reasoning_tokens", "recorded_at"},
			where: `WHERE run_id = $1 ORDER BY source, call_id, observation`},
		{name: "usage_verdicts", cols: []string{"ordinal", "member_id", "session_id", "verdict", "deltas", "detail", "recorded_at",
			"duplicated", "multiple", "sources"},
			json: map[string]bool{"deltas": true, "sources": true}, where: `WHERE run_id = $1 ORDER BY ordinal`},
	}
}

// loadTerminalRows returns, for each table of terminalTables, the run's rows
// as RFC 8785 canonical JSON objects of their columns: strings, integers and
// booleans as themselves, NULL as null, timestamps as strings in
// EventTimeLayout, lists as arrays, JSON columns as the JSON value they hold
// (a stored text that is not JSON as a string).
func loadTerminalRows(ctx context.Context, q queryer, runID string) (map[string][]json.RawMessage, error) {
	byRun, err := loadTerminalRowsOf(ctx, q, runID)
	if err != nil {
		return nil, err
	}
	return byRun[runID], nil
}

// terminalRowsByRun reads every run's rows that terminal hash v5 covers in one query per table
// (loadTerminalRows of each run, in one pass) instead of one query per table and run. nil when
// the pass fails: each run is then read on its own, and any error is its own.
func terminalRowsByRun(ctx context.Context, q queryer) map[string]map[string][]json.RawMessage {
	byRun, err := loadTerminalRowsOf(ctx, q, "")
	if err != nil {
		return nil
	}
	return byRun
}

// loadTerminalRowsOf is loadTerminalRows of runID, or of every run ("" ), by run id: every run
// read has a list (perhaps empty) for each table. The rows of each run are those, and in the
// order, that the table's own query (terminalTable.where) selects for that run.
func loadTerminalRowsOf(ctx context.Context, q queryer, runID string) (map[string]map[string][]json.RawMessage, error) {
	out := map[string]map[string][]json.RawMessage{}
	lists := func(id string) map[string][]json.RawMessage {
		m := out[id]
		if m == nil {
			m = emptyTerminalRows()
			out[id] = m
		}
		return m
	}
	if runID != "" {
		lists(runID)
	}
	for _, t := range terminalTables() {
		sel := make([]string, len(t.cols))
		for i, c := range t.cols {
			sel[i] = c
			if t.json[c] {
				sel[i] = "CAST(" + c + " AS VARCHAR)"
			}
		}
		query, args, first := `SELECT `+strings.Join(sel, ", ")+` FROM `+t.name+` `+t.where, []any{runID}, 1
		if runID == "" {
			query, args, first = t.everyRun(sel), nil, 0
		}
		rows, err := q.QueryContext(ctx, query, args...)
		if err != nil {
			return nil, fmt.Errorf("evidence: run %s: read %s: %w", runID, t.name, err)
		}
		for rows.Next() {
			id := runID
			vals := make([]any, len(t.cols))
			ptrs := make([]any, len(t.cols)+1)
			ptrs[0] = &id
			for i := range vals {
				ptrs[i+1] = &vals[i]
			}
			if err := rows.Scan(ptrs[first:]...); err != nil {
				rows.Close()
				return nil, fmt.Errorf("evidence: run %s: read %s: %w", runID, t.name, err)
			}
			obj := make(map[string]json.RawMessage, len(t.cols))
			for i, c := range t.cols {
				v, err := terminalValue(vals[i], t.json[c])
				if err != nil {
					rows.Close()
					return nil, fmt.Errorf("evidence: run %s: %s.%s: %w", id, t.name, c, err)
				}
				obj[c] = v
			}
			b, err := canonical(obj)
			if err != nil {
				rows.Close()
				return nil, fmt.Errorf("evidence: run %s: canonicalize a row of %s: %w", id, t.name, err)
			}
			m := lists(id)
			m[t.name] = append(m[t.name], b)
		}
		if err := rows.Close(); err != nil {
			return nil, fmt.Errorf("evidence: run %s: read %s: %w", runID, t.name, err)
		}
	}
	return out, nil
}

// everyRun is t's query for the rows of every run at once, preceded by the run id they belong
// to: per run, the rows t.where selects for it, in its order.
func (t terminalTable) everyRun(sel []string) string {
	if t.name == "artifacts" {
		// An artifact is a run's when the run links it, once however many names link it.
		return `SELECT l.run_id, ` + strings.Join(sel, ", ") + ` FROM artifacts
			JOIN (SELECT DISTINCT run_id, digest FROM run_artifacts WHERE run_id IS NOT NULL) l USING (digest)
			ORDER BY l.run_id, digest`
	}
	return `SELECT run_id, ` + strings.Join(sel, ", ") + ` FROM ` + t.name + ` WHERE run_id IS NOT NULL ORDER BY run_id, ` + t.orderBy()
}

// orderBy is the ORDER BY list of t.where.
func (t terminalTable) orderBy() string {
	_, after, _ := strings.Cut(t.where, "ORDER BY ")
	return after
}

// terminalValue encodes one scanned column value for terminal hash v5.
func terminalValue(v any, isJSON bool) (json.RawMessage, error) {
	switch x := v.(type) {
	case nil:
		return json.RawMessage("null"), nil
	case time.Time:
		return json.Marshal(x.UTC().Format(EventTimeLayout))
	case string:
		if isJSON && json.Valid([]byte(x)) {
			return json.RawMessage(x), nil
		}
		return json.Marshal(x)
	case []byte:
		return json.Marshal(string(x))
	case int8, int16, int32, int64, uint8, uint16, uint32, uint64, bool:
		return json.Marshal(x)
	case []any:
		ss, err := toStrings(x)
		if err != nil {
			return nil, err
		}
		return json.Marshal(ss)
	}
	return nil, fmt.Errorf("unexpected value of type %T", v)
}

// terminalObjectV5 is the hashed object of terminal version 5.
type terminalObjectV5 struct {
	Version        int                          `json:"terminal_version"`
	RunID          string                       `json:"run_id"`
	CorrectsRunID  string                       `json:"corrects_run_id"`
	EnvelopeDigest string                       `json:"envelope_digest"`
	AdmissionHash  string                       `json:"admission_hash"`
	LastEventHash  string                       `json:"last_event_hash"`
	EventCount     int64                        `json:"event_count"`
	Status         string                       `json:"status"`
	FinalizedAt    string                       `json:"finalized_at"`
	WriterID       *int64                       `json:"writer_id"`
	WriterHash     *string                      `json:"writer_hash"`
	Verdict        terminalVerdictV5            `json:"verdict"`
	Tables         map[string][]json.RawMessage `json:"tables"`
}

type terminalVerdictV5 struct {
	Verdict          string   `json:"verdict"`
	RequestedVerdict string   `json:"requested_verdict"`
	Reasons          []string `json:"reasons"`
}

func terminalHashV5(r TerminalRecord) (string, error) {
	if !isDigest(r.AdmissionHash) {
		return "", fmt.Errorf("evidence: run %s: admission hash %q is not SHA-256 hex", r.RunID, r.AdmissionHash)
	}
	if r.Status != StatusFinalized && r.Status != StatusInterrupted {
		return "", fmt.Errorf("evidence: run %s: terminal status %q is neither %s nor %s", r.RunID, r.Status, StatusFinalized, StatusInterrupted)
	}
	tables := map[string][]json.RawMessage{}
	for _, t := range terminalTables() {
		rows := r.Tables[t.name]
		if rows == nil {
			rows = []json.RawMessage{}
		}
		tables[t.name] = rows
	}
	for name := range r.Tables {
		if _, ok := tables[name]; !ok {
			return "", fmt.Errorf("evidence: run %s: terminal hash version 5 covers no table %q", r.RunID, name)
		}
	}
	reasons := r.Verdict.Reasons
	if reasons == nil {
		reasons = []string{}
	}
	obj := terminalObjectV5{Version: TerminalV5, RunID: r.RunID, CorrectsRunID: r.CorrectsRunID, EnvelopeDigest: r.EnvelopeDigest,
		AdmissionHash: r.AdmissionHash, LastEventHash: r.LastEventHash, EventCount: r.EventCount, Status: r.Status,
		FinalizedAt: r.FinalizedAt.UTC().Format(EventTimeLayout), WriterID: r.WriterID,
		Verdict: terminalVerdictV5{Verdict: r.Verdict.Verdict, RequestedVerdict: r.RequestedVerdict, Reasons: reasons}, Tables: tables}
	if r.WriterHash != "" {
		h := r.WriterHash
		obj.WriterHash = &h
	}
	b, err := canonical(obj)
	if err != nil {
		return "", fmt.Errorf("evidence: canonicalize terminal record of run %s: %w", r.RunID, err)
	}
	return sha256Hex(b), nil
}

// writerOfRun returns wid, the run's runs.writer_id (nil when NULL), and that session's id, hash
// and backfilled flag (nil when the row is gone).
func writerOfRun(ctx context.Context, q queryer, runID string, wid sql.NullInt64) (*int64, *Writer, error) {
	if !wid.Valid {
		return nil, nil, nil
	}
	id := wid.Int64
	w := Writer{WriterID: id}
	err := q.QueryRowContext(ctx, `SELECT hash, backfilled FROM writers WHERE writer_id = ?`, id).Scan(&w.Hash, &w.Backfilled)
	if errors.Is(err, sql.ErrNoRows) {
		return &id, nil, nil
	}
	if err != nil {
		return nil, nil, fmt.Errorf("evidence: run %s: writer %d: %w", runID, id, err)
	}
	return &id, &w, nil
}

// emptyTerminalRows is the rows terminal hash v5 covers of a run that has none: an empty list
// for each table.
func emptyTerminalRows() map[string][]json.RawMessage {
	m := map[string][]json.RawMessage{}
	for _, t := range terminalTables() {
		m[t.name] = []json.RawMessage{}
	}
	return m
}

package gateway

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/gowebpki/jcs"

	"github.com/assay-audit/assay/internal/sqliteuri"
)

// RowForm is the version of RecordRow that DigestRecords hashes: 2 covers
// every column of the requests table; 1, what bindings recorded before
// 2026-12-02 hold, left out echoed_session (DigestRecordsForm).
const RowForm = 2

// RecordRow is a Record as JSON: every column of the usage database's
// requests table, named as there (latency_ms in milliseconds, started_at in
// its stored text form, unknown token counts null). DigestRecords hashes
// these; a run that links gateway rows as an artifact links these.
type RecordRow struct {
	ID                    int64   `json:"id"`
	SessionID             string  `json:"session_id"`
	Method                string  `json:"method"`
	Path                  string  `json:"path"`
	Model                 string  `json:"model"`
	Stream                bool    `json:"stream"`
	Status                int     `json:"status"`
	LatencyMS             float64 `json:"latency_ms"`
	RequestSHA256         string  `json:"request_sha256"`
	ResponseSHA256        string  `json:"response_sha256"`
	RequestBytes          int64   `json:"request_bytes"`
	ResponseBytes         int64   `json:"response_bytes"`
	UsageState            string  `json:"usage_state"`
	PromptTokens          *int64  `json:"prompt_tokens"`
	CompletionTokens      *int64  `json:"completion_tokens"`
	TotalTokens           *int64  `json:"total_tokens"`
	CachedTokens          *int64  `json:"cached_tokens"`
	ReasoningTokens       *int64  `json:"reasoning_tokens"`
	RelayError            string  `json:"relay_error"`
	StartedAt             string  `json:"started_at"`
	AnsweredModel         string  `json:"answered_model"`
	ResponseDecodedSHA256 string  `json:"response_decoded_sha256"`
	EchoedSession         string  `json:"echoed_session"`
}

// DigestRecords returns the SHA-256 hex of the RFC 8785 (JCS) form of recs as
// a JSON array, in the order given, each record an object of every column of
// the usage database's requests table (started_at in its stored text form):
// what a run's "gateway" binding (evidence.Binding) records.
func DigestRecords(recs []Record) (string, error) { return DigestRecordsForm(recs, RowForm) }

// DigestRecordsForm is DigestRecords over the rows of the given RowForm: 2
// (RowForm) every column; 1 every column but echoed_session, as bindings
// recorded before it was covered were computed, so that they still verify
// (and a value edited in that column goes unseen for them alone).
//
// Errors: a form other than 1 or 2; encoding errors.
func DigestRecordsForm(recs []Record, form int) (string, error) {
	if form != 1 && form != RowForm {
		return "", fmt.Errorf("gateway: row form %d is not one this build reads (1, %d)", form, RowForm)
	}
	raw, err := json.Marshal(RecordRows(recs))
	if err != nil {
		return "", fmt.Errorf("gateway: encode records: %w", err)
	}
	if form == 1 {
		var rows []map[string]json.RawMessage
		if err := json.Unmarshal(raw, &rows); err != nil {
			return "", fmt.Errorf("gateway: encode records: %w", err)
		}
		for _, row := range rows {
			delete(row, "echoed_session")
		}
		if raw, err = json.Marshal(rows); err != nil {
			return "", fmt.Errorf("gateway: encode records: %w", err)
		}
	}
	canon, err := jcs.Transform(raw)
	if err != nil {
		return "", fmt.Errorf("gateway: canonicalize records: %w", err)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:]), nil
}

// RecordRows returns recs as RecordRows, in the order given.
func RecordRows(recs []Record) []RecordRow {
	rows := make([]RecordRow, len(recs))
	for i, r := range recs {
		rows[i] = RecordRow{ID: r.ID, SessionID: r.SessionID, Method: r.Method, Path: r.Path, Model: r.Model, Stream: r.Stream,
			Status: r.Status, LatencyMS: r.LatencyMS, RequestSHA256: r.RequestSHA256, ResponseSHA256: r.ResponseSHA256,
			RequestBytes: r.RequestBytes, ResponseBytes: r.ResponseBytes, UsageState: r.UsageState, PromptTokens: r.PromptTokens,
			CompletionTokens: r.CompletionTokens, TotalTokens: r.TotalTokens, CachedTokens: r.CachedTokens, ReasoningTokens: r.ReasoningTokens,
			RelayError: r.RelayError, StartedAt: r.StartedAt.UTC().Format(timeLayout), AnsweredModel: r.AnsweredModel,
			ResponseDecodedSHA256: r.ResponseDecodedSHA256, EchoedSession: r.EchoedSession}
	}
	return rows
}

// ReadRecords reads, from the usage database at path, the records with
// after < ID <= upTo whose session id starts with sessionPrefix, ordered by
// ID, without a gateway: read-only, taking no lock and creating no file
// beside the database (sqliteuri.ReadOnlyFile). It is how a run's records are
// read back to verify its binding.
//
// Errors: one wrapping fs.ErrNotExist when the file is gone; ErrSchemaVersion
// for a usage database of another version; others when the file is not a
// usage database or cannot be read.
func ReadRecords(ctx context.Context, path string, after, upTo int64, sessionPrefix string) ([]Record, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("gateway: usage database path %q: %w", path, err)
	}
	fi, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("gateway: usage database %s is gone: %w", abs, err)
	}
	if err != nil {
		return nil, fmt.Errorf("gateway: usage database %s: %w", abs, err)
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("gateway: usage database %s is not a regular file", abs)
	}
	db, err := sql.Open("sqlite3", sqliteuri.ReadOnlyFile(abs))
	if err != nil {
		return nil, fmt.Errorf("gateway: open usage database %s: %w", abs, err)
	}
	defer db.Close()
	var version string
	if err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'schema_version'`).Scan(&version); err != nil {
		if errors.Is(err, sql.ErrNoRows) {
			return nil, fmt.Errorf("gateway: %s is not a usage database: its meta table records no schema_version", abs)
		}
		return nil, fmt.Errorf("gateway: %s is not a usage database: its meta table cannot be read (%v)", abs, err)
	}
	if !readableVersion(version) {
		return nil, fmt.Errorf("%w: %s has version %q, this assay reads \"2\" and %q", ErrSchemaVersion, abs, version, SchemaVersion)
	}
	s := &store{path: abs, r: db}
	return s.query(ctx, fmt.Sprintf("ids %d..%d of sessions %q", after+1, upTo, sessionPrefix),
		`id > ?1 AND id <= ?2 AND substr(session_id, 1, length(?3)) = ?3`, after, upTo, sessionPrefix)
}

// readableVersion reports whether a usage database of this schema version can be read as it is:
// version 3 only widened version 2's usage_state CHECK, so their rows read the same.
func readableVersion(v string) bool { return v == "2" || v == SchemaVersion }

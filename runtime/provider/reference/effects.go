package reference

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"
	"github.com/mattn/go-sqlite3"

	"github.com/assay-audit/assay/internal/sqliteuri"
	"github.com/assay-audit/assay/runtime/effect"
)

// The reference effect service: a stand-in for a remote backend that members
// change through the network tool remote_put, and whose receipts
// reconciliation can look up after a response was lost.
//
//	PUT {base}/effects/{key}   body {"name":"...","value":"..."}
//	GET {base}/effects/{key}
//
// {base} is the provider's base path (/v1) and {key} the effect's idempotency
// key, path-escaped. The Idempotency-Key header, when sent, must equal it
// (draft-ietf-httpapi-idempotency-key-header). The first PUT of a key commits
// value under name and records a receipt: 201 with the receipt. Every later
// PUT of that key commits nothing: 200 with the existing receipt when its
// body is the same, 422 when the body differs (a key reused for another
// payload is refused, as the draft recommends); both are counted in the
// receipt's Puts. GET answers 200 with the receipt, 404 when the key has
// none. A malformed key or body is 400 and changes nothing. Errors use the
// OpenAI-style {"error":{...}} body of the chat endpoint.
//
// Receipts persist in a SQLite database (Config.EffectsDB; in memory when
// empty), so another process serving or reading the same file
// (OpenEffectsReader) finds them. Concurrent PUTs of one key, from any number
// of processes, commit once: the check and the commit are one SQLite write
// transaction.
//
// Under FaultHTTP500AfterCommit the committing PUT of a remote_put call that
// this server's reply issued at the fault's member and turn is answered 500
// after the commit, as a backend whose response was lost would answer.

// Effect service names and limits.
const (
	// RemotePutTool is the network tool whose calls the reference provider's
	// executors make to publish what they wrote, when the request offers it.
	RemotePutTool = "remote_put"
	// FaultHTTP500AfterCommit answers HTTP 500 with an error body to the PUT
	// that committed the effect of a remote_put call which this server's
	// reply issued to the fault's member at the fault's turn: the effect
	// committed and its receipt exists, but the caller never learns it. A
	// repeated PUT of that key gets the receipt (200). PUTs of keys this
	// server did not issue a call for are never faulted.
	FaultHTTP500AfterCommit = "http_500_after_commit"
	// FaultHangAfterCommit commits the PUT of a remote_put call issued at the
	// fault's turn, then never answers: the response is held until the client
	// gives up or goes away (a process killed between intent and outcome, or
	// a timeout that leaves the effect unknown).
	FaultHangAfterCommit = "hang_after_commit"
	// MaxEffectBodyBytes bounds a PUT body (1 MiB); a larger one is 400.
	MaxEffectBodyBytes = 1 << 20
	// MaxEffectKeyBytes bounds an idempotency key (bytes); a longer one is 400.
	MaxEffectKeyBytes = 512
	// effectsSchemaVersion is the effects database's PRAGMA user_version.
	effectsSchemaVersion = 1
)

// ErrNoEffectsDB is returned (wrapped, naming the path) by OpenEffectsReader
// when there is no effects database at the path; it also matches
// fs.ErrNotExist.
var ErrNoEffectsDB = fmt.Errorf("no effects database: %w", fs.ErrNotExist)

// ErrNotEffectsDB is returned (wrapped) for a file that is not an effects
// database of this version: another SQLite file, or not SQLite at all.
var ErrNotEffectsDB = errors.New("not a reference effects database")

// EffectReceipt is the effect service's receipt, as GET and PUT answer it
// (JSON) and as the database keeps it.
type EffectReceipt struct {
	// IdempotencyKey is the effect's key, as PUT in the path.
	IdempotencyKey string `json:"idempotency_key"`
	// Committed is always true: the service records a receipt only for an
	// effect it committed.
	Committed bool `json:"committed"`
	// Reference is the service's id of the commit: "ref-" followed by the
	// first 16 hex digits of SHA-256(key + "\n" + PayloadSHA256).
	Reference string `json:"reference"`
	// Time is when the commit happened (UTC, wall clock of the serving
	// process).
	Time time.Time `json:"time"`
	// Puts counts the PUTs the service received for the key with a well-formed
	// body, the committing one included: 1 means nothing was sent twice.
	Puts int64 `json:"puts"`
	// Name is the name the value was committed under.
	Name string `json:"name"`
	// PayloadSHA256 is the SHA-256 hex of the committed body's RFC 8785
	// canonical JSON {"name":...,"value":...}: equal to the payload hash the
	// tool boundary records in the effect's intent.
	PayloadSHA256 string `json:"payload_sha256"`
}

// Receipt returns the receipt as effect.Receipt, the form reconciliation
// applies.
func (r EffectReceipt) Receipt() effect.Receipt {
	return effect.Receipt{IdempotencyKey: r.IdempotencyKey, Committed: r.Committed, Reference: r.Reference, Time: r.Time,
		PayloadSHA256: r.PayloadSHA256}
}

// remotePutArgs is a PUT body and the arguments of a remote_put call.
type remotePutArgs struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// payloadSHA256 is the SHA-256 hex of the body's RFC 8785 canonical JSON: the payload hash the
// tool boundary records for the same arguments, so a receipt can be matched to its intent.
func (a remotePutArgs) payloadSHA256() string {
	canon, err := jcs.Transform(compactJSON(a))
	if err != nil {
		// compactJSON of two strings is always valid JSON; keep the compact form if it were not.
		canon = compactJSON(a)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// effectStore is the read-write effects database of a serving process.
type effectStore struct {
	path string
	db   *sql.DB
}

// openEffectStore opens (creating) the effects database at path, or an
// in-memory one when path is "".
func openEffectStore(ctx context.Context, path string) (*effectStore, error) {
	dsn := "file::memory:?_txlock=immediate"
	if path != "" {
		abs, err := filepath.Abs(path)
		if err != nil {
			return nil, fmt.Errorf("reference: effects database %q: %w", path, err)
		}
		if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
			return nil, fmt.Errorf("reference: effects database directory for %s: %w", abs, err)
		}
		path = abs
		dsn = sqliteuri.File(abs, "mode=rwc&_journal_mode=WAL&_synchronous=FULL&_busy_timeout=10000&_txlock=immediate")
	}
	db, err := sql.Open("sqlite3", dsn)
	if err != nil {
		return nil, fmt.Errorf("reference: open effects database %s: %w", path, err)
	}
	// One connection: an in-memory database lives in it, and one writer per
	// process needs no more. Other processes are serialised by SQLite's lock.
	db.SetMaxOpenConns(1)
	db.SetConnMaxIdleTime(0)
	s := &effectStore{path: path, db: db}
	if err := s.migrate(ctx); err != nil {
		return nil, errors.Join(err, db.Close())
	}
	return s, nil
}

const effectsSchema = `
CREATE TABLE IF NOT EXISTS effect_receipts (
	idempotency_key TEXT PRIMARY KEY,
	name            TEXT NOT NULL,
	payload_sha256  TEXT NOT NULL,
	reference       TEXT NOT NULL,
	committed_at    TEXT NOT NULL,
	puts            INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS effect_values (
	name            TEXT PRIMARY KEY,
	value           TEXT NOT NULL,
	idempotency_key TEXT NOT NULL,
	committed_at    TEXT NOT NULL
);`

func (s *effectStore) migrate(ctx context.Context) error {
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		if notADatabase(err) {
			return fmt.Errorf("reference: %s: %w: %v", s.path, ErrNotEffectsDB, err)
		}
		return fmt.Errorf("reference: effects database %s: %w", s.path, err)
	}
	defer func() { _ = tx.Rollback() }()
	var version int
	if err := tx.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return fmt.Errorf("reference: effects database %s: %w: %v", s.path, ErrNotEffectsDB, err)
	}
	switch version {
	case effectsSchemaVersion:
	case 0:
		var tables int
		if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master`).Scan(&tables); err != nil {
			return fmt.Errorf("reference: effects database %s: %w: %v", s.path, ErrNotEffectsDB, err)
		}
		if tables > 0 {
			return fmt.Errorf("reference: %s: %w: it holds other tables", s.path, ErrNotEffectsDB)
		}
		if _, err := tx.ExecContext(ctx, effectsSchema); err != nil {
			return fmt.Errorf("reference: effects database %s: create schema: %w", s.path, err)
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`PRAGMA user_version = %d`, effectsSchemaVersion)); err != nil {
			return fmt.Errorf("reference: effects database %s: %w", s.path, err)
		}
	default:
		return fmt.Errorf("reference: %s: %w: schema version %d (this assay reads %d)", s.path, ErrNotEffectsDB, version, effectsSchemaVersion)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("reference: effects database %s: %w", s.path, err)
	}
	return nil
}

// notADatabase reports SQLite's SQLITE_NOTADB: the file is not a database.
func notADatabase(err error) bool {
	var se sqlite3.Error
	return errors.As(err, &se) && se.Code == sqlite3.ErrNotADB
}

func (s *effectStore) close() error { return s.db.Close() }

const receiptColumns = `idempotency_key, name, payload_sha256, reference, committed_at, puts`

// scanReceipt reads one receipt row.
func scanReceipt(row interface{ Scan(...any) error }) (EffectReceipt, error) {
	var rc EffectReceipt
	var at string
	if err := row.Scan(&rc.IdempotencyKey, &rc.Name, &rc.PayloadSHA256, &rc.Reference, &at, &rc.Puts); err != nil {
		return EffectReceipt{}, err
	}
	t, err := time.Parse(time.RFC3339Nano, at)
	if err != nil {
		return EffectReceipt{}, fmt.Errorf("receipt %s: committed_at %q: %w", rc.IdempotencyKey, at, err)
	}
	rc.Time, rc.Committed = t, true
	return rc, nil
}

// putResult is what one PUT did.
type putResult struct {
	receipt EffectReceipt
	// created: this PUT committed the effect. conflict: the key has a receipt
	// for another payload.
	created, conflict bool
}

// put commits a under key once: the first PUT inserts the receipt and the
// value; later ones only count. The whole decision is one write transaction,
// so concurrent PUTs (from any process) commit once.
func (s *effectStore) put(ctx context.Context, key string, a remotePutArgs, now time.Time) (putResult, error) {
	payload := a.payloadSHA256()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return putResult{}, fmt.Errorf("effects database %s: begin: %w", s.path, err)
	}
	defer func() { _ = tx.Rollback() }()
	rc, err := scanReceipt(tx.QueryRowContext(ctx, `SELECT `+receiptColumns+` FROM effect_receipts WHERE idempotency_key = ?`, key))
	var res putResult
	switch {
	case errors.Is(err, sql.ErrNoRows):
		at := now.UTC().Format(time.RFC3339Nano)
		rc = EffectReceipt{IdempotencyKey: key, Committed: true, Reference: "ref-" + shortHash(16, key, payload),
			Puts: 1, Name: a.Name, PayloadSHA256: payload}
		rc.Time, _ = time.Parse(time.RFC3339Nano, at)
		if _, err := tx.ExecContext(ctx, `INSERT INTO effect_receipts (`+receiptColumns+`) VALUES (?, ?, ?, ?, ?, 1)`,
			key, a.Name, payload, rc.Reference, at); err != nil {
			return putResult{}, fmt.Errorf("effects database %s: record receipt %s: %w", s.path, key, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO effect_values (name, value, idempotency_key, committed_at) VALUES (?, ?, ?, ?)
			ON CONFLICT (name) DO UPDATE SET value = excluded.value, idempotency_key = excluded.idempotency_key, committed_at = excluded.committed_at`,
			a.Name, a.Value, key, at); err != nil {
			return putResult{}, fmt.Errorf("effects database %s: commit %s: %w", s.path, a.Name, err)
		}
		res.created = true
	case err != nil:
		return putResult{}, fmt.Errorf("effects database %s: read receipt %s: %w", s.path, key, err)
	default:
		if _, err := tx.ExecContext(ctx, `UPDATE effect_receipts SET puts = puts + 1 WHERE idempotency_key = ?`, key); err != nil {
			return putResult{}, fmt.Errorf("effects database %s: count PUT of %s: %w", s.path, key, err)
		}
		rc.Puts++
		res.conflict = rc.PayloadSHA256 != payload
	}
	if err := tx.Commit(); err != nil {
		return putResult{}, fmt.Errorf("effects database %s: commit: %w", s.path, err)
	}
	res.receipt = rc
	return res, nil
}

// receipt returns key's receipt, found=false when it has none.
func receiptOf(ctx context.Context, db *sql.DB, path, key string) (EffectReceipt, bool, error) {
	rc, err := scanReceipt(db.QueryRowContext(ctx, `SELECT `+receiptColumns+` FROM effect_receipts WHERE idempotency_key = ?`, key))
	if errors.Is(err, sql.ErrNoRows) {
		return EffectReceipt{}, false, nil
	}
	if err != nil {
		return EffectReceipt{}, false, fmt.Errorf("effects database %s: receipt %s: %w", path, key, err)
	}
	return rc, true, nil
}

// effects returns the server's effects database, opening it on first use.
func (s *Server) effects(ctx context.Context) (*effectStore, error) {
	s.effMu.Lock()
	defer s.effMu.Unlock()
	if s.closed {
		return nil, errors.New("reference: server closed")
	}
	if s.eff == nil {
		st, err := openEffectStore(ctx, s.effectsPath)
		if err != nil {
			return nil, err
		}
		s.eff = st
	}
	return s.eff, nil
}

// Close releases the server's effects database. Requests after Close that
// need it are answered 500. It is safe to call more than once.
func (s *Server) Close() error {
	s.effMu.Lock()
	defer s.effMu.Unlock()
	s.closed = true
	if s.eff == nil {
		return nil
	}
	err := s.eff.close()
	s.eff = nil
	return err
}

// issuedCall is where a remote_put call this server's reply made came from.
type issuedCall struct {
	session string
	turn    int
}

// recordIssued remembers the remote_put calls of a reply, for
// FaultHTTP500AfterCommit.
func (s *Server) recordIssued(rep reply, session string, turn int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tc := range rep.toolCalls {
		if tc.name == RemotePutTool {
			s.issued[tc.id] = issuedCall{session: session, turn: turn}
		}
	}
}

// issuedFor finds the issued call an idempotency key belongs to: the key's
// last ":"-separated part ends with the call id the reply gave ("call_...";
// the runtime may prefix it, e.g. "r1-call_...").
func (s *Server) issuedFor(key string) (issuedCall, bool) {
	part := key[strings.LastIndex(key, ":")+1:]
	i := strings.LastIndex(part, "call_")
	if i < 0 {
		return issuedCall{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.issued[part[i:]]
	return c, ok
}

// checkEffectKey refuses a key that is empty, too long, not UTF-8 or holds
// control characters.
func checkEffectKey(key string) error {
	switch {
	case key == "":
		return errors.New("the idempotency key in the path is empty")
	case len(key) > MaxEffectKeyBytes:
		return fmt.Errorf("the idempotency key is %d bytes, limit %d", len(key), MaxEffectKeyBytes)
	case !utf8.ValidString(key):
		return errors.New("the idempotency key is not UTF-8")
	case strings.ContainsFunc(key, unicode.IsControl):
		return errors.New("the idempotency key holds control characters")
	}
	return nil
}

// decodePutBody reads {"name","value"} exactly: both strings, name not empty,
// nothing else.
func decodePutBody(r io.Reader) (remotePutArgs, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return remotePutArgs{}, fmt.Errorf("body exceeds %d bytes", MaxEffectBodyBytes)
		}
		return remotePutArgs{}, fmt.Errorf("reading body: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return remotePutArgs{}, fmt.Errorf("body is not a JSON object: %w", err)
	}
	for k := range fields {
		if k != "name" && k != "value" {
			return remotePutArgs{}, fmt.Errorf("unknown field %q (want name and value)", k)
		}
	}
	var a remotePutArgs
	for _, f := range []struct {
		key string
		dst *string
	}{{"name", &a.Name}, {"value", &a.Value}} {
		v, ok := fields[f.key]
		if !ok {
			return remotePutArgs{}, fmt.Errorf("missing field %q", f.key)
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return remotePutArgs{}, fmt.Errorf("field %q is not a string", f.key)
		}
	}
	if strings.TrimSpace(a.Name) == "" {
		return remotePutArgs{}, errors.New(`field "name" is empty`)
	}
	return a, nil
}

func (s *Server) putEffect(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := checkEffectKey(key); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "key", "invalid_idempotency_key", err.Error())
		return
	}
	if h := r.Header.Get("Idempotency-Key"); h != "" && h != key {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "Idempotency-Key", "idempotency_key_mismatch",
			fmt.Sprintf("the Idempotency-Key header %q does not match the key in the path %q", h, key))
		return
	}
	args, err := decodePutBody(http.MaxBytesReader(w, r.Body, MaxEffectBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid_body", err.Error())
		return
	}
	// The body arrived whole: the commit no longer depends on the client
	// staying, as with any backend.
	ctx := context.WithoutCancel(r.Context())
	st, err := s.effects(ctx)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "effects_unavailable", err.Error())
		return
	}
	res, err := st.put(ctx, key, args, time.Now())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "effects_unavailable", err.Error())
		return
	}
	switch {
	case res.conflict:
		writeError(w, http.StatusUnprocessableEntity, "invalid_request_error", "key", "idempotency_key_reused",
			fmt.Sprintf("idempotency key %q was committed with another payload (sha256 %s); nothing was committed", key, res.receipt.PayloadSHA256))
	case res.created:
		if c, ok := s.issuedFor(key); ok && s.faulted(FaultHangAfterCommit, c.session, c.turn) {
			<-r.Context().Done() // committed; the answer never comes
			return
		}
		if c, ok := s.issuedFor(key); ok && s.faulted(FaultHTTP500AfterCommit, c.session, c.turn) {
			writeError(w, http.StatusInternalServerError, "server_error", "", "reference_fault_http_500_after_commit",
				fmt.Sprintf("scripted fault %s for session %q turn %d", FaultHTTP500AfterCommit, c.session, c.turn))
			return
		}
		writeReceipt(w, http.StatusCreated, res.receipt)
	default:
		writeReceipt(w, http.StatusOK, res.receipt)
	}
}

func (s *Server) getEffect(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := checkEffectKey(key); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "key", "invalid_idempotency_key", err.Error())
		return
	}
	st, err := s.effects(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "effects_unavailable", err.Error())
		return
	}
	rc, found, err := receiptOf(r.Context(), st.db, st.path, key)
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, "server_error", "", "effects_unavailable", err.Error())
	case !found:
		writeError(w, http.StatusNotFound, "invalid_request_error", "key", "receipt_not_found",
			fmt.Sprintf("no receipt for idempotency key %q: nothing was committed under it", key))
	default:
		writeReceipt(w, http.StatusOK, rc)
	}
}

func writeReceipt(w http.ResponseWriter, status int, rc EffectReceipt) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(compactJSON(rc))
}

// EffectsReader reads an effects database directly, without a server: the
// receipt lookup that still works after the provider that served the effects
// is gone (assay reconcile, assay resume). It implements effect.Backend and
// is safe for concurrent use.
type EffectsReader struct {
	path string
	db   *sql.DB
}

// OpenEffectsReader opens the effects database at path read-only. It returns
// ErrNoEffectsDB (wrapped, matching fs.ErrNotExist) when there is no file,
// and ErrNotEffectsDB (wrapped) for a file that is not an effects database.
func OpenEffectsReader(ctx context.Context, path string) (*EffectsReader, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("reference: effects database %q: %w", path, err)
	}
	if _, err := os.Stat(abs); errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("reference: %w at %s", ErrNoEffectsDB, abs)
	} else if err != nil {
		return nil, fmt.Errorf("reference: effects database %s: %w", abs, err)
	}
	db, err := sql.Open("sqlite3", sqliteuri.File(abs, "mode=ro&_busy_timeout=10000"))
	if err != nil {
		return nil, fmt.Errorf("reference: open effects database %s: %w", abs, err)
	}
	var version int
	if err := db.QueryRowContext(ctx, `PRAGMA user_version`).Scan(&version); err != nil {
		return nil, errors.Join(fmt.Errorf("reference: %s: %w: %v", abs, ErrNotEffectsDB, err), db.Close())
	}
	if version != effectsSchemaVersion {
		return nil, errors.Join(fmt.Errorf("reference: %s: %w: schema version %d (this assay reads %d)", abs, ErrNotEffectsDB,
			version, effectsSchemaVersion), db.Close())
	}
	return &EffectsReader{path: abs, db: db}, nil
}

// Path is the database's absolute path.
func (r *EffectsReader) Path() string { return r.path }

// Receipt returns the service's receipt for key (with its PUT count),
// found=false when the key has none, or an error when the database could not
// be read.
func (r *EffectsReader) Receipt(ctx context.Context, key string) (EffectReceipt, bool, error) {
	return receiptOf(ctx, r.db, r.path, key)
}

// Receipts returns every receipt the service committed, ordered by key, or an error
// when the database could not be read: what an auditor reads to find effects no recorded intent
// accounts for.
func (r *EffectsReader) Receipts(ctx context.Context) ([]EffectReceipt, error) {
	rows, err := r.db.QueryContext(ctx, `SELECT `+receiptColumns+` FROM effect_receipts ORDER BY idempotency_key`)
	if err != nil {
		return nil, fmt.Errorf("effects database %s: receipts: %w", r.path, err)
	}
	defer rows.Close()
	var out []EffectReceipt
	for rows.Next() {
		rc, err := scanReceipt(rows)
		if err != nil {
			return nil, fmt.Errorf("effects database %s: receipts: %w", r.path, err)
		}
		out = append(out, rc)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("effects database %s: receipts: %w", r.path, err)
	}
	return out, nil
}

// Value returns the value committed under name and the idempotency key of
// the PUT that committed it, found=false when nothing was committed under it.
func (r *EffectsReader) Value(ctx context.Context, name string) (value, key string, found bool, err error) {
	err = r.db.QueryRowContext(ctx, `SELECT value, idempotency_key FROM effect_values WHERE name = ?`, name).Scan(&value, &key)
	if errors.Is(err, sql.ErrNoRows) {
		return "", "", false, nil
	}
	if err != nil {
		return "", "", false, fmt.Errorf("effects database %s: value %s: %w", r.path, name, err)
	}
	return value, key, true, nil
}

// Lookup implements effect.Backend: the receipt of q.IdempotencyKey, found
// only when the service committed the effect. The service knows effects by
// their own key only, so q.BatchKey is not consulted.
func (r *EffectsReader) Lookup(ctx context.Context, q effect.Query) (effect.Receipt, bool, error) {
	rc, found, err := r.Receipt(ctx, q.IdempotencyKey)
	if err != nil || !found {
		return effect.Receipt{}, false, err
	}
	return rc.Receipt(), true, nil
}

// Close closes the database.
func (r *EffectsReader) Close() error { return r.db.Close() }

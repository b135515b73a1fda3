package evidence

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/assay-audit/assay/internal/atomicfile"
)

// ManifestFormat identifies the manifest file format. Version 2 pins the
// store's logs (a checkpoint), not only its runs.
const ManifestFormat = "assay-evidence-manifest/2"

// ErrManifestRefused: a manifest was requested for a store with runs that do
// not verify, for part of a store, or for an empty store; writing one would
// certify tampered evidence, or pin nothing.
var ErrManifestRefused = errors.New("manifest refused")

// ErrBadManifest: the manifest to check against cannot be used: missing,
// not JSON, another format, empty, inconsistent with its own checkpoint (an
// entry removed), or unsigned although a signature is required.
var ErrBadManifest = errors.New("not a usable manifest")

// ErrManifestSigned: ReadManifest found a signed manifest (a DSSE envelope);
// read it with evidence/attest, which checks the signature.
var ErrManifestSigned = errors.New("the manifest is signed")

// Manifest pins a store as it was when the manifest was written, to be kept
// apart from the store (another machine, a signed commit, a ticket) and
// signed where a key is at hand (evidence/attest): a checkpoint of the
// store's three logs — the admissions chain, the finalizations chain and the
// writer sessions — as transparency logs publish their size and head
// (RFC 9162, section 4.10), and every admitted run with its terminal hash.
// A later CheckManifest proves the pinned prefix of each log unchanged and
// lists what was added since; with strict, or when Final is set, anything
// added since fails.
type Manifest struct {
	Format string `json:"format"` // ManifestFormat
	Store  string `json:"store"`  // the store path it was written from (informational)
	// StoreCreatedAt is the store's meta.created_at: a store recreated since
	// has another.
	StoreCreatedAt string `json:"store_created_at"`
	SchemaVersion  int    `json:"schema_version"` // of the store
	CreatedAt      string `json:"created_at"`     // RFC 3339, UTC
	// Final says the store was complete: CheckManifest fails on any run,
	// finalization or writer session added since, as with strict.
	Final      bool               `json:"final"`
	Checkpoint ManifestCheckpoint `json:"checkpoint"`
	// Runs lists every admitted run, in admission order (ordinals 1..
	// Checkpoint.Admissions.Size).
	Runs []ManifestRun `json:"runs"`
}

// ManifestCheckpoint is the size and head hash of each of the store's logs.
type ManifestCheckpoint struct {
	Admissions    ChainHead `json:"admissions"`
	Finalizations ChainHead `json:"finalizations"`
	Writers       ChainHead `json:"writers"`
}

// ManifestRun is one admitted run as the manifest pins it.
type ManifestRun struct {
	RunID         string `json:"run_id"`
	Ordinal       int64  `json:"ordinal"`        // its admission
	AdmissionHash string `json:"admission_hash"` // SHA-256 hex
	// Status is "finalized", "interrupted" (sealed, or waiting for its seal)
	// or "open" (interrupted, seen by a reader before any writer sealed it).
	Status       string `json:"status"`
	TerminalHash string `json:"terminal_hash"` // SHA-256 hex; "" when not finalized or sealed
	EventCount   int64  `json:"event_count"`
}

// Manifest check outcomes (RunVerification.Manifest).
const (
	ManifestMatch   = "match"   // pinned with the same terminal hash (or still unfinished, as pinned)
	ManifestDiffers = "differs" // pinned with another terminal hash or admission, or no longer finalized
	ManifestMissing = "missing" // pinned but absent from the store
	// ManifestAdded: admitted after the manifest's checkpoint. Allowed
	// unless the check is strict or the manifest final.
	ManifestAdded = "added"
	// ManifestFinalizedSince: pinned unfinished, finalized or sealed since.
	// Allowed unless the check is strict or the manifest final.
	ManifestFinalizedSince = "finalized_since"
	// ManifestUnexpected: added or finalized since a final manifest, or
	// under a strict check.
	ManifestUnexpected = "unexpected"
)

// BuildManifest makes a manifest of the store from results, Verify's output
// over every run of it (no run named). final marks the store complete.
//
// Errors: ErrManifestRefused when any result does not pass (RunVerification.
// Passed: tampered, damaged, a missing or corrupt payload, an open run whose
// writer is live), when results do not cover every admitted run, or when the
// store has no runs; database errors.
func (s *Store) BuildManifest(ctx context.Context, results []RunVerification, final bool) (Manifest, error) {
	if err := s.beginRead(); err != nil {
		return Manifest{}, err
	}
	defer s.mu.Unlock()
	var bad []string
	byID := map[string]RunVerification{}
	for _, r := range results {
		if !r.Passed() {
			what := r.RunID
			if what == "" {
				what = "store " + r.Table
			}
			bad = append(bad, what+" "+r.Status)
		}
		byID[r.RunID] = r
	}
	if len(bad) > 0 {
		return Manifest{}, fmt.Errorf("%w: these do not verify: %v", ErrManifestRefused, bad)
	}
	m := Manifest{Format: ManifestFormat, Store: s.path, SchemaVersion: SchemaVersion, Final: final,
		CreatedAt: time.Now().UTC().Format(time.RFC3339)}
	if err := s.conn.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'created_at'`).Scan(&m.StoreCreatedAt); err != nil {
		return Manifest{}, fmt.Errorf("evidence: manifest: %w", err)
	}
	var err error
	if m.Checkpoint, err = checkpointOf(ctx, s.conn); err != nil {
		return Manifest{}, err
	}
	if m.Checkpoint.Admissions.Size == 0 {
		return Manifest{}, fmt.Errorf("%w: the store holds no runs: a manifest of it would pin nothing", ErrManifestRefused)
	}
	rows, err := s.conn.QueryContext(ctx, `SELECT a.ordinal, a.run_id, a.hash, r.status, coalesce(r.terminal_hash, ''), coalesce(r.event_count, 0)
		FROM admissions a JOIN runs r USING (run_id) ORDER BY a.ordinal`)
	if err != nil {
		return Manifest{}, fmt.Errorf("evidence: manifest: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r ManifestRun
		if err := rows.Scan(&r.Ordinal, &r.RunID, &r.AdmissionHash, &r.Status, &r.TerminalHash, &r.EventCount); err != nil {
			return Manifest{}, fmt.Errorf("evidence: manifest: %w", err)
		}
		if _, ok := byID[r.RunID]; !ok {
			return Manifest{}, fmt.Errorf("%w: run %s was not verified: a manifest pins the whole store, verify every run", ErrManifestRefused, r.RunID)
		}
		m.Runs = append(m.Runs, r)
	}
	if err := rows.Err(); err != nil {
		return Manifest{}, fmt.Errorf("evidence: manifest: %w", err)
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, fmt.Errorf("%w: %v", ErrManifestRefused, err)
	}
	return m, nil
}

// checkpointOf reads the size and head of the three logs as stored.
func checkpointOf(ctx context.Context, q queryer) (ManifestCheckpoint, error) {
	var c ManifestCheckpoint
	var err error
	if c.Admissions, err = headOf(ctx, q, "admissions"); err != nil {
		return c, err
	}
	if c.Finalizations, err = headOf(ctx, q, "finalizations"); err != nil {
		return c, err
	}
	c.Writers = ChainHead{Head: ZeroHash}
	var hash string
	var closeHash sql.NullString
	err = q.QueryRowContext(ctx, `SELECT writer_id, hash, close_hash FROM writers ORDER BY writer_id DESC LIMIT 1`).Scan(&c.Writers.Size, &hash, &closeHash)
	switch {
	case errors.Is(err, sql.ErrNoRows):
	case err != nil:
		return c, fmt.Errorf("evidence: head of writers: %w", err)
	default:
		c.Writers.Head = hash
		if closeHash.Valid && closeHash.String != "" {
			c.Writers.Head = closeHash.String
		}
	}
	return c, nil
}

// Validate checks that m is a manifest CheckManifest can use: the format,
// a non-empty checkpoint, and runs that are exactly admissions
// 1..Checkpoint.Admissions.Size, the last one's admission hash the head.
// Errors wrap ErrBadManifest and name what is wrong, e.g. "admission 3 is not
// listed" for an entry removed.
func (m Manifest) Validate() error {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: %s", ErrBadManifest, fmt.Sprintf(format, args...))
	}
	if m.Format != ManifestFormat {
		return bad("format %q, not %q", m.Format, ManifestFormat)
	}
	c := m.Checkpoint
	if c.Admissions.Size <= 0 || len(m.Runs) == 0 {
		return bad("it pins no runs (an empty manifest proves nothing)")
	}
	for _, h := range []ChainHead{c.Admissions, c.Finalizations, c.Writers} {
		if h.Size < 0 || !isDigest(h.Head) || (h.Size == 0) != (h.Head == ZeroHash) {
			return bad("its checkpoint holds a malformed head (size %d, head %q)", h.Size, h.Head)
		}
	}
	seen := map[string]bool{}
	for i, r := range m.Runs {
		want := int64(i + 1)
		switch {
		case r.Ordinal > want:
			return bad("admission %d is not listed (runs[%d] is admission %d): an entry was removed", want, i, r.Ordinal)
		case r.Ordinal != want:
			return bad("runs[%d] is admission %d, out of order or repeated", i, r.Ordinal)
		case !validRunID(r.RunID) || seen[r.RunID]:
			return bad("runs[%d]: %q is not a run id, or is listed twice", i, r.RunID)
		case !isDigest(r.AdmissionHash):
			return bad("runs[%d] (%s): the admission hash is not SHA-256 hex", i, r.RunID)
		case r.Status != StatusFinalized && r.Status != StatusInterrupted && r.Status != StatusOpen:
			return bad("runs[%d] (%s): status %q", i, r.RunID, r.Status)
		case r.Status == StatusFinalized && !isDigest(r.TerminalHash), r.TerminalHash != "" && !isDigest(r.TerminalHash):
			return bad("runs[%d] (%s): the terminal hash is not SHA-256 hex", i, r.RunID)
		}
		seen[r.RunID] = true
	}
	if n := int64(len(m.Runs)); n != c.Admissions.Size {
		return bad("it lists %d runs, but its checkpoint pins %d admissions: admission %d is not listed", n, c.Admissions.Size, n+1)
	}
	if last := m.Runs[len(m.Runs)-1]; last.AdmissionHash != c.Admissions.Head {
		return bad("the last run's admission hash is not the checkpoint's head")
	}
	return nil
}

// WriteManifest writes m as indented JSON to path atomically (temp file in the
// same directory, fsync, rename, directory fsync: internal/atomicfile). It refuses a manifest that does not
// Validate.
func WriteManifest(path string, m Manifest) error {
	if err := m.Validate(); err != nil {
		return fmt.Errorf("evidence: write manifest %s: %w", path, err)
	}
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("evidence: encode manifest: %w", err)
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o644); err != nil {
		return fmt.Errorf("evidence: manifest: %w", err)
	}
	return nil
}

// ParseManifest decodes and validates an unsigned manifest. Errors wrap
// ErrBadManifest (ErrManifestSigned for a DSSE envelope).
func ParseManifest(data []byte) (Manifest, error) {
	var probe struct {
		PayloadType *string `json:"payloadType"`
	}
	if json.Unmarshal(data, &probe) == nil && probe.PayloadType != nil {
		return Manifest{}, fmt.Errorf("%w: %w: read it with its public key", ErrBadManifest, ErrManifestSigned)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var m Manifest
	if err := dec.Decode(&m); err != nil {
		return Manifest{}, fmt.Errorf("%w: not a manifest: %v", ErrBadManifest, err)
	}
	if err := m.Validate(); err != nil {
		return Manifest{}, err
	}
	return m, nil
}

// ReadManifest reads and validates an unsigned manifest file. Errors name the
// path and wrap ErrBadManifest (a missing file also fs.ErrNotExist; a signed
// one ErrManifestSigned).
func ReadManifest(path string) (Manifest, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, fmt.Errorf("evidence: %w: no manifest at %s (%w)", ErrBadManifest, path, err)
	}
	if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() {
		return Manifest{}, fmt.Errorf("evidence: %w: %s is not a regular file", ErrBadManifest, path)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("evidence: read manifest: %w", err)
	}
	m, err := ParseManifest(data)
	if err != nil {
		return Manifest{}, fmt.Errorf("evidence: manifest %s: %w", path, err)
	}
	return m, nil
}

// CheckManifest compares the store and Verify's results with m: it recomputes
// the prefix of each log the manifest pins (admissions 1..n, finalizations
// 1..n, writer sessions 1..n) and compares its head with the checkpoint's, and
// returns the results with Manifest set on each run: match, differs (its
// terminal hash or admission changed, or it is no longer finalized:
// Status becomes tampered), added (admitted after the checkpoint),
// finalized_since; plus a tampered entry for each pinned run the store lacks
// and for each log whose pinned prefix changed. With strict, or when m.Final
// is set, added and finalized_since become unexpected (failing), and a log
// grown since is reported. results should cover every run (Verify with no
// run named); with runs named, pinned runs outside them are not compared.
func (s *Store) CheckManifest(ctx context.Context, m Manifest, results []RunVerification, strict bool) ([]RunVerification, error) {
	if err := m.Validate(); err != nil {
		return nil, err
	}
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	strict = strict || m.Final
	var out []RunVerification
	storeRow := func(table, format string, args ...any) {
		out = append(out, RunVerification{Status: VerifyTampered, Table: table, Manifest: ManifestDiffers, Detail: fmt.Sprintf(format, args...)})
	}
	var created string
	if err := s.conn.QueryRowContext(ctx, `SELECT value FROM meta WHERE key = 'created_at'`).Scan(&created); err == nil && m.StoreCreatedAt != "" && created != m.StoreCreatedAt {
		storeRow("meta", "the store was created at %s, the manifest's at %s: another store, or one recreated", created, m.StoreCreatedAt)
	}
	now, err := checkpointOf(ctx, s.conn)
	if err != nil {
		return nil, err
	}
	for _, p := range []struct {
		table  string
		pinned ChainHead
		now    ChainHead
		head   func(int64) (string, error)
	}{
		{"admissions", m.Checkpoint.Admissions, now.Admissions, func(n int64) (string, error) { return admissionsPrefix(ctx, s.conn, n) }},
		{"finalizations", m.Checkpoint.Finalizations, now.Finalizations, func(n int64) (string, error) { return finalizationsPrefix(ctx, s.conn, n) }},
		{"writers", m.Checkpoint.Writers, now.Writers, func(n int64) (string, error) { return writersPrefix(ctx, s.conn, n) }},
	} {
		got, err := p.head(p.pinned.Size)
		switch {
		case err != nil && ctx.Err() != nil:
			return nil, ctx.Err()
		case err != nil:
			storeRow(p.table, "the %d %s the manifest pins do not verify: %v", p.pinned.Size, p.table, err)
		case got != p.pinned.Head:
			storeRow(p.table, "the first %d %s are not those the manifest pins (head %s, pinned %s): the log was rewritten", p.pinned.Size, p.table, got, p.pinned.Head)
		case strict && p.now.Size > p.pinned.Size:
			what := "the manifest is final"
			if !m.Final {
				what = "the check is strict"
			}
			out = append(out, RunVerification{Status: VerifyTampered, Table: p.table, Manifest: ManifestUnexpected,
				Detail: fmt.Sprintf("%d %s were added after the manifest's checkpoint (%d pinned, %d now), and %s", p.now.Size-p.pinned.Size, p.table, p.pinned.Size, p.now.Size, what)})
		}
	}
	pinned := map[string]ManifestRun{}
	for _, r := range m.Runs {
		pinned[r.RunID] = r
	}
	seen := map[string]bool{}
	all := true
	for _, r := range results {
		if r.RunID == "" {
			out = append(out, r)
			continue
		}
		seen[r.RunID] = true
		mr, ok := pinned[r.RunID]
		switch {
		case !ok:
			r.Manifest = ManifestAdded
			if strict {
				r.Manifest = ManifestUnexpected
				r.Detail = "admitted after the manifest's checkpoint, which " + strictWhy(m) + "; " + r.Detail
			}
		case mr.TerminalHash != "" && r.TerminalHash == mr.TerminalHash:
			r.Manifest = ManifestMatch
		case mr.TerminalHash != "":
			r.Manifest = ManifestDiffers
			r.Status = VerifyTampered
			got := r.TerminalHash
			if got == "" {
				got = "none (no longer finalized)"
			}
			r.Detail = fmt.Sprintf("terminal hash %s differs from the manifest's %s; %s", got, mr.TerminalHash, r.Detail)
		case r.TerminalHash != "":
			r.Manifest = ManifestFinalizedSince
			if strict {
				r.Manifest = ManifestUnexpected
				r.Detail = "finalized after the manifest's checkpoint, which " + strictWhy(m) + "; " + r.Detail
			}
		default:
			r.Manifest = ManifestMatch
		}
		out = append(out, r)
	}
	var ids []string
	for _, r := range results {
		if r.RunID != "" {
			ids = append(ids, r.RunID)
		}
	}
	if n, err := s.countRuns(ctx); err == nil && n != int64(len(ids)) {
		all = false
	}
	if all {
		for _, mr := range m.Runs {
			if !seen[mr.RunID] {
				out = append(out, RunVerification{RunID: mr.RunID, Status: VerifyTampered, Manifest: ManifestMissing,
					Detail: fmt.Sprintf("pinned by the manifest (admission %d, terminal hash %q) but missing from the store", mr.Ordinal, mr.TerminalHash)})
			}
		}
	}
	return out, nil
}

func strictWhy(m Manifest) string {
	if m.Final {
		return "is final"
	}
	return "the strict check holds to"
}

func (s *Store) countRuns(ctx context.Context) (int64, error) {
	var n int64
	err := s.conn.QueryRowContext(ctx, `SELECT count(*) FROM runs`).Scan(&n)
	return n, err
}

// admissionsPrefix recomputes admissions 1..n (each link and hash) and
// returns the hash of admission n.
func admissionsPrefix(ctx context.Context, q queryer, n int64) (string, error) {
	rows, err := q.QueryContext(ctx, `SELECT ordinal, run_id, envelope_digest, corrects_run_id, admitted_at, backfilled, prev_hash, hash
		FROM admissions WHERE ordinal <= ? ORDER BY ordinal`, n)
	if err != nil {
		return "", err
	}
	defer rows.Close()
	prev, i := ZeroHash, int64(0)
	for rows.Next() {
		var a Admission
		if err := rows.Scan(&a.Ordinal, &a.RunID, &a.EnvelopeDigest, &a.CorrectsRunID, &a.AdmittedAt, &a.Backfilled, &a.PrevHash, &a.Hash); err != nil {
			return "", err
		}
		i++
		if a.Ordinal != i || a.PrevHash != prev {
			return "", fmt.Errorf("admission %d does not link to admission %d", a.Ordinal, i-1)
		}
		if h, err := AdmissionHash(prev, a); err != nil || h != a.Hash {
			return "", fmt.Errorf("admission %d does not hash to its stored hash", a.Ordinal)
		}
		prev = a.Hash
	}
	if err := rows.Err(); err != nil {
		return "", err
	}
	if i != n {
		return "", fmt.Errorf("the store holds %d of them", i)
	}
	return prev, nil
}

// finalizationsPrefix recomputes finalizations 1..n and returns the hash of entry n.
func finalizationsPrefix(ctx context.Context, q queryer, n int64) (string, error) {
	fins, err := loadFinalizations(ctx, q)
	if err != nil {
		return "", err
	}
	prev := ZeroHash
	for i := int64(0); i < n; i++ {
		if i >= int64(len(fins)) {
			return "", fmt.Errorf("the store holds %d of them", len(fins))
		}
		f := fins[i]
		if f.Ordinal != i+1 || f.PrevHash != prev {
			return "", fmt.Errorf("finalization %d does not link to finalization %d", f.Ordinal, i)
		}
		if h, err := FinalizationHash(prev, f); err != nil || h != f.Hash {
			return "", fmt.Errorf("finalization %d does not hash to its stored hash", f.Ordinal)
		}
		prev = f.Hash
	}
	return prev, nil
}

// writersPrefix recomputes writer sessions 1..n and returns the final hash of session n.
func writersPrefix(ctx context.Context, q queryer, n int64) (string, error) {
	ws, err := loadWriters(ctx, q)
	if err != nil {
		return "", err
	}
	prev := ZeroHash
	for i := int64(0); i < n; i++ {
		if i >= int64(len(ws)) {
			return "", fmt.Errorf("the store holds %d of them", len(ws))
		}
		w := ws[i]
		if w.WriterID != i+1 || w.PrevHash != prev {
			return "", fmt.Errorf("writer %d does not link to writer %d", w.WriterID, i)
		}
		if h, err := WriterHash(prev, w); err != nil || h != w.Hash {
			return "", fmt.Errorf("writer %d does not hash to its stored hash", w.WriterID)
		}
		if w.ClosedAt != nil {
			if h, err := WriterCloseHash(w); err != nil || h != w.CloseHash {
				return "", fmt.Errorf("writer %d's closing record does not hash to its stored hash", w.WriterID)
			}
		}
		prev = w.finalHash()
	}
	return prev, nil
}

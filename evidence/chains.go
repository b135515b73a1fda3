package evidence

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"
)

// The store-wide hash chains of schema v5 besides admissions (admissions.go):
// writer sessions and finalizations. Each link is, like an event's,
//
//	hex(SHA-256(prev_hash_raw_32_bytes || JCS(object)))
//
// with JCS the RFC 8785 canonical form; docs/evidence-schema.md gives each object.

// ChainHead is a chain's size (rows, gap-free from ordinal 1) and the hash of
// its last row (ZeroHash when empty): a checkpoint of the chain, as
// transparency logs publish one (RFC 9162, section 4.10 "signed tree head",
// here over a linear chain rather than a Merkle tree).
type ChainHead struct {
	Size int64  `json:"size"`
	Head string `json:"head"` // SHA-256 hex
}

// Writer is one writer session as the writers table records it. From schema
// v5 a session is recorded when its first write begins (opening the store
// for writing and writing nothing records nothing), chained to the session
// before it, and pins the admissions and finalizations chains as it found
// them; a clean close adds a closing record pinning them as it left them.
type Writer struct {
	WriterID int64
	PID      int64
	Command  string
	Host     string
	OpenedAt time.Time  // UTC, microsecond precision
	ClosedAt *time.Time // nil while open, or when the session crashed or was killed
	// StoreCreatedAt is the store's meta.created_at, which every session's
	// hash covers: a store's identity cannot be changed without breaking
	// every writer record. Not a column of its own.
	StoreCreatedAt string
	// Backfilled marks a session recorded before schema v5, chained by the
	// migration: its heads are unknown (nil), and its runs were admitted
	// under an older schema.
	Backfilled bool
	// AtOpen are the admissions and finalizations chains when the session
	// began; nil for a backfilled session.
	AdmissionsAtOpen, FinalizationsAtOpen *ChainHead
	PrevHash                              string // the previous session's final hash (CloseHash, else Hash); ZeroHash for the first
	Hash                                  string // WriterHash(PrevHash, this)
	// AtClose are the chains when the session closed cleanly; nil otherwise
	// (and for a backfilled session closed before v5).
	AdmissionsAtClose, FinalizationsAtClose *ChainHead
	CloseHash                               string // WriterCloseHash(Hash, this); "" unless closed
}

// finalHash is what the next session's PrevHash links to.
func (w Writer) finalHash() string {
	if w.CloseHash != "" {
		return w.CloseHash
	}
	return w.Hash
}

func chainLink(prevHash string, obj any) (string, error) {
	prev, err := hex.DecodeString(prevHash)
	if err != nil || len(prev) != sha256.Size {
		return "", fmt.Errorf("evidence: previous hash %q is not SHA-256 hex", prevHash)
	}
	b, err := canonical(obj)
	if err != nil {
		return "", err
	}
	return sha256Hex(append(prev, b...)), nil
}

func headPtr(h *ChainHead) (*int64, *string) {
	if h == nil {
		return nil, nil
	}
	size, head := h.Size, h.Head
	return &size, &head
}

// WriterHash computes a writer session's chain hash over
//
//	{"writer_id", "pid", "command", "host", "opened_at" (EventTimeLayout),
//	 "backfilled", "admissions", "admissions_head", "finalizations",
//	 "finalizations_head", "store_created_at" (meta.created_at)}
//
// (the chains at open; null for a backfilled session), chained to prevHash
// (the previous session's final hash, ZeroHash for the first). It fails when
// prevHash is not SHA-256 hex or a string is not UTF-8.
func WriterHash(prevHash string, w Writer) (string, error) {
	if !utf8.ValidString(w.Command) || !utf8.ValidString(w.Host) {
		return "", fmt.Errorf("evidence: writer %d: command or host is not UTF-8", w.WriterID)
	}
	an, ah := headPtr(w.AdmissionsAtOpen)
	fn, fh := headPtr(w.FinalizationsAtOpen)
	return chainLink(prevHash, struct {
		WriterID          int64   `json:"writer_id"`
		PID               int64   `json:"pid"`
		Command           string  `json:"command"`
		Host              string  `json:"host"`
		OpenedAt          string  `json:"opened_at"`
		Backfilled        bool    `json:"backfilled"`
		Admissions        *int64  `json:"admissions"`
		AdmissionsHead    *string `json:"admissions_head"`
		Finalizations     *int64  `json:"finalizations"`
		FinalizationsHead *string `json:"finalizations_head"`
		StoreCreatedAt    string  `json:"store_created_at"`
	}{w.WriterID, w.PID, w.Command, w.Host, w.OpenedAt.UTC().Format(EventTimeLayout), w.Backfilled, an, ah, fn, fh, w.StoreCreatedAt})
}

// WriterCloseHash computes a writer session's closing hash over
//
//	{"writer_id", "closed_at" (EventTimeLayout), "admissions",
//	 "admissions_head", "finalizations", "finalizations_head"}
//
// (the chains at close; null for a session closed before v5), chained to the
// session's own hash. w.ClosedAt must be set.
func WriterCloseHash(w Writer) (string, error) {
	if w.ClosedAt == nil {
		return "", fmt.Errorf("evidence: writer %d is not closed", w.WriterID)
	}
	an, ah := headPtr(w.AdmissionsAtClose)
	fn, fh := headPtr(w.FinalizationsAtClose)
	return chainLink(w.Hash, struct {
		WriterID          int64   `json:"writer_id"`
		ClosedAt          string  `json:"closed_at"`
		Admissions        *int64  `json:"admissions"`
		AdmissionsHead    *string `json:"admissions_head"`
		Finalizations     *int64  `json:"finalizations"`
		FinalizationsHead *string `json:"finalizations_head"`
	}{w.WriterID, w.ClosedAt.UTC().Format(EventTimeLayout), an, ah, fn, fh})
}

// Finalization is one entry of the store-wide finalizations chain (schema
// v5): Finalize, or the sealing of an interrupted run, appends one in the
// transaction that fixes the run's terminal hash.
type Finalization struct {
	Ordinal      int64     // 1, 2, ... in finalization order
	RunID        string    // the run
	Status       string    // StatusFinalized, or StatusInterrupted for a sealed run
	TerminalHash string    // the run's terminal hash, SHA-256 hex
	WriterID     *int64    // the writer session that finalized or sealed it; nil for a backfilled entry of a run finalized under schema v1
	FinalizedAt  time.Time // runs.finalized_at: UTC, microsecond precision
	// Backfilled marks an entry chained by the v4 -> v5 migration for a run
	// finalized before it.
	Backfilled bool
	PrevHash   string // previous entry's Hash; ZeroHash for the first
	Hash       string // FinalizationHash(PrevHash, this)
}

// FinalizationHash computes a finalization's chain hash over
//
//	{"ordinal", "run_id", "status", "terminal_hash", "writer_id",
//	 "finalized_at" (EventTimeLayout), "backfilled"}
//
// chained to prevHash (ZeroHash for the first). It fails when prevHash is not
// SHA-256 hex, the ordinal lies outside 1..2^53 or the run id is not UTF-8.
func FinalizationHash(prevHash string, f Finalization) (string, error) {
	if f.Ordinal < 1 || f.Ordinal > maxJCSInt {
		return "", fmt.Errorf("evidence: finalization of run %s: ordinal %d outside 1..2^53", f.RunID, f.Ordinal)
	}
	if !utf8.ValidString(f.RunID) {
		return "", fmt.Errorf("evidence: finalization %d: run id is not UTF-8", f.Ordinal)
	}
	return chainLink(prevHash, struct {
		Ordinal      int64  `json:"ordinal"`
		RunID        string `json:"run_id"`
		Status       string `json:"status"`
		TerminalHash string `json:"terminal_hash"`
		WriterID     *int64 `json:"writer_id"`
		FinalizedAt  string `json:"finalized_at"`
		Backfilled   bool   `json:"backfilled"`
	}{f.Ordinal, f.RunID, f.Status, f.TerminalHash, f.WriterID, f.FinalizedAt.UTC().Format(EventTimeLayout), f.Backfilled})
}

// headOf returns the size and last hash of the admissions or finalizations
// chain as stored (no verification: Verify checks the chain).
func headOf(ctx context.Context, q queryer, table string) (ChainHead, error) {
	h := ChainHead{Head: ZeroHash}
	err := q.QueryRowContext(ctx, `SELECT ordinal, hash FROM `+table+` ORDER BY ordinal DESC LIMIT 1`).Scan(&h.Size, &h.Head)
	if errors.Is(err, sql.ErrNoRows) {
		return ChainHead{Head: ZeroHash}, nil
	}
	if err != nil {
		return ChainHead{}, fmt.Errorf("evidence: head of %s: %w", table, err)
	}
	return h, nil
}

// logHeads returns the heads of the admissions and finalizations chains, as
// a writer session's record pins them.
func logHeads(ctx context.Context, q queryer) (admissions, finalizations ChainHead, err error) {
	if admissions, err = headOf(ctx, q, "admissions"); err != nil {
		return ChainHead{}, ChainHead{}, err
	}
	if finalizations, err = headOf(ctx, q, "finalizations"); err != nil {
		return ChainHead{}, ChainHead{}, err
	}
	return admissions, finalizations, nil
}

// appendFinalization chains f to the end of the finalizations chain inside
// tx, filling Ordinal, PrevHash and Hash, and returns it as stored.
func appendFinalization(ctx context.Context, tx *sql.Tx, f Finalization) (Finalization, error) {
	head, err := headOf(ctx, tx, "finalizations")
	if err != nil {
		return Finalization{}, err
	}
	if !isDigest(head.Head) {
		return Finalization{}, fmt.Errorf("evidence: finalize run %s: stored hash of finalization %d is not SHA-256 hex; run assay verify", f.RunID, head.Size)
	}
	f.Ordinal, f.PrevHash = head.Size+1, head.Head
	f.FinalizedAt = utcMicro(f.FinalizedAt)
	if f.Hash, err = FinalizationHash(f.PrevHash, f); err != nil {
		return Finalization{}, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO finalizations (ordinal, run_id, status, terminal_hash, writer_id, finalized_at, backfilled, prev_hash, hash)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`, f.Ordinal, f.RunID, f.Status, f.TerminalHash, f.WriterID, f.FinalizedAt, f.Backfilled, f.PrevHash, f.Hash); err != nil {
		return Finalization{}, fmt.Errorf("evidence: finalize run %s: chain finalization: %w", f.RunID, err)
	}
	return f, nil
}

// loadWriters returns every writer session in writer_id order.
func loadWriters(ctx context.Context, q queryer) ([]Writer, error) {
	rows, err := q.QueryContext(ctx, `SELECT writer_id, pid, command, host, opened_at, closed_at, backfilled,
			admissions_at_open, admissions_head_at_open, finalizations_at_open, finalizations_head_at_open, prev_hash, hash,
			admissions_at_close, admissions_head_at_close, finalizations_at_close, finalizations_head_at_close, coalesce(close_hash, ''),
			coalesce((SELECT min(value) FROM meta WHERE key = 'created_at'), '')
		FROM writers ORDER BY writer_id`)
	if err != nil {
		return nil, fmt.Errorf("evidence: load writers: %w", err)
	}
	defer rows.Close()
	var out []Writer
	for rows.Next() {
		var w Writer
		var closed sql.NullTime
		var heads [4]sql.NullInt64
		var hashes [4]sql.NullString
		if err := rows.Scan(&w.WriterID, &w.PID, &w.Command, &w.Host, &w.OpenedAt, &closed, &w.Backfilled,
			&heads[0], &hashes[0], &heads[1], &hashes[1], &w.PrevHash, &w.Hash,
			&heads[2], &hashes[2], &heads[3], &hashes[3], &w.CloseHash, &w.StoreCreatedAt); err != nil {
			return nil, fmt.Errorf("evidence: load writers: %w", err)
		}
		w.OpenedAt = w.OpenedAt.UTC()
		if closed.Valid {
			t := closed.Time.UTC()
			w.ClosedAt = &t
		}
		targets := []**ChainHead{&w.AdmissionsAtOpen, &w.FinalizationsAtOpen, &w.AdmissionsAtClose, &w.FinalizationsAtClose}
		for i, t := range targets {
			if heads[i].Valid || hashes[i].Valid {
				*t = &ChainHead{Size: heads[i].Int64, Head: hashes[i].String}
			}
		}
		out = append(out, w)
	}
	return out, rows.Err()
}

// loadFinalizations returns the finalizations chain in ordinal order.
func loadFinalizations(ctx context.Context, q queryer) ([]Finalization, error) {
	rows, err := q.QueryContext(ctx, `SELECT ordinal, run_id, status, terminal_hash, writer_id, finalized_at, backfilled, prev_hash, hash
		FROM finalizations ORDER BY ordinal`)
	if err != nil {
		return nil, fmt.Errorf("evidence: load finalizations: %w", err)
	}
	defer rows.Close()
	var out []Finalization
	for rows.Next() {
		var f Finalization
		var wid sql.NullInt64
		if err := rows.Scan(&f.Ordinal, &f.RunID, &f.Status, &f.TerminalHash, &wid, &f.FinalizedAt, &f.Backfilled, &f.PrevHash, &f.Hash); err != nil {
			return nil, fmt.Errorf("evidence: load finalizations: %w", err)
		}
		if wid.Valid {
			v := wid.Int64
			f.WriterID = &v
		}
		f.FinalizedAt = f.FinalizedAt.UTC()
		out = append(out, f)
	}
	return out, rows.Err()
}

// admissionHashes returns the stored admission hashes by ordinal (index 0 is
// ordinal 1; a gap leaves "").
func admissionHashes(ctx context.Context, q queryer) ([]string, error) {
	rows, err := q.QueryContext(ctx, `SELECT ordinal, hash FROM admissions ORDER BY ordinal`)
	if err != nil {
		return nil, fmt.Errorf("evidence: verify admissions: %w", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var ord int64
		var h string
		if err := rows.Scan(&ord, &h); err != nil {
			return nil, fmt.Errorf("evidence: verify admissions: %w", err)
		}
		if ord < 1 || ord > int64(len(out))+1_000_000 {
			continue
		}
		for int64(len(out)) < ord-1 {
			out = append(out, "")
		}
		if int64(len(out)) == ord-1 {
			out = append(out, h)
		}
	}
	return out, rows.Err()
}

// finalizationChainFindings checks the finalizations chain: ordinals 1..n
// without a gap, each prev_hash linking to its predecessor, each hash
// recomputing, backfilled entries first. Findings are keyed by the run whose
// entry breaks the chain.
func finalizationChainFindings(fins []Finalization) map[string][]finding {
	out := map[string][]finding{}
	expected, prev := int64(1), ZeroHash
	firstLive := int64(0)
	for _, f := range fins {
		add := func(format string, args ...any) {
			out[f.RunID] = append(out[f.RunID], finding{VerifyTampered, fmt.Sprintf(format, args...)})
		}
		switch {
		case f.Ordinal > expected:
			add("finalization %d: finalizations %d..%d are missing: the record of a finalization was deleted", f.Ordinal, expected, f.Ordinal-1)
		case f.PrevHash != prev:
			add("finalization %d: prev_hash does not link to finalization %d: a finalization before it was deleted or edited", f.Ordinal, f.Ordinal-1)
		}
		if h, err := FinalizationHash(f.PrevHash, f); err != nil || h != f.Hash {
			add("finalization %d: hash mismatch", f.Ordinal)
		}
		if f.Backfilled && firstLive > 0 {
			add("finalization %d is marked backfilled, but finalization %d before it was chained by Finalize", f.Ordinal, firstLive)
		}
		if !f.Backfilled && firstLive == 0 {
			firstLive = f.Ordinal
		}
		expected, prev = f.Ordinal+1, f.Hash
	}
	return out
}

// prefixHead returns the head of the chain prefix of size n from hashes
// (index 0 is entry 1): ZeroHash for 0, "" when the chain is shorter.
func prefixHead(hashes []string, n int64) string {
	switch {
	case n == 0:
		return ZeroHash
	case n < 0 || n > int64(len(hashes)):
		return ""
	}
	return hashes[n-1]
}

// writerChainFindings checks the writer sessions: ids 1..n without a gap,
// each prev_hash the previous session's final hash, each hash and closing
// hash recomputing, a closing record exactly when closed_at is set,
// backfilled sessions first, and each non-backfilled session's heads naming
// prefixes of the admissions and finalizations chains (adms, fins) that only
// grow from one record to the next.
func writerChainFindings(writers []Writer, adms []string, fins []Finalization) []RunVerification {
	finHashes := make([]string, 0, len(fins))
	for i, f := range fins {
		if f.Ordinal != int64(i+1) {
			break
		}
		finHashes = append(finHashes, f.Hash)
	}
	var out []RunVerification
	expected, prev := int64(1), ZeroHash
	var lastAdm, lastFin int64
	firstLive := int64(0)
	for _, w := range writers {
		var bad []string
		switch {
		case w.WriterID > expected:
			bad = append(bad, fmt.Sprintf("writers %d..%d are missing: a writer session's record was deleted", expected, w.WriterID-1))
		case w.PrevHash != prev:
			bad = append(bad, fmt.Sprintf("prev_hash does not link to writer %d", w.WriterID-1))
		}
		if h, err := WriterHash(w.PrevHash, w); err != nil || h != w.Hash {
			bad = append(bad, "hash mismatch: the session's record was edited")
		}
		switch {
		case w.ClosedAt == nil && (w.CloseHash != "" || w.AdmissionsAtClose != nil || w.FinalizationsAtClose != nil):
			bad = append(bad, "a closing record without closed_at")
		case w.ClosedAt != nil && w.CloseHash == "":
			bad = append(bad, "closed_at without a closing hash")
		case w.ClosedAt != nil:
			if h, err := WriterCloseHash(w); err != nil || h != w.CloseHash {
				bad = append(bad, "closing hash mismatch: closed_at or the heads at close were edited")
			}
		}
		if w.Backfilled && firstLive > 0 {
			bad = append(bad, fmt.Sprintf("marked backfilled, but writer %d before it was recorded under schema 5", firstLive))
		}
		if !w.Backfilled {
			if firstLive == 0 {
				firstLive = w.WriterID
			}
			for _, h := range []struct {
				what string
				head *ChainHead
				list []string
				last *int64
			}{{"admissions at open", w.AdmissionsAtOpen, adms, &lastAdm}, {"finalizations at open", w.FinalizationsAtOpen, finHashes, &lastFin},
				{"admissions at close", w.AdmissionsAtClose, adms, &lastAdm}, {"finalizations at close", w.FinalizationsAtClose, finHashes, &lastFin}} {
				if h.head == nil {
					if strings.HasSuffix(h.what, "open") {
						bad = append(bad, h.what+" not recorded")
					}
					continue
				}
				switch got := prefixHead(h.list, h.head.Size); {
				case got == "":
					bad = append(bad, fmt.Sprintf("%s: the session saw %d entries, the chain now has %d: entries were deleted", h.what, h.head.Size, len(h.list)))
				case got != h.head.Head:
					bad = append(bad, fmt.Sprintf("%s: entry %d is not the one the session saw: the chain was rewritten", h.what, h.head.Size))
				case h.head.Size < *h.last:
					bad = append(bad, fmt.Sprintf("%s: %d entries, fewer than %d recorded before", h.what, h.head.Size, *h.last))
				}
				*h.last = max(*h.last, h.head.Size)
			}
		}
		if len(bad) > 0 {
			out = append(out, RunVerification{Status: VerifyTampered, Table: "writers", Row: fmt.Sprintf("writer_id=%d", w.WriterID),
				Detail: fmt.Sprintf("writer %d: %s", w.WriterID, strings.Join(bad, "; "))})
		}
		expected, prev = w.WriterID+1, w.finalHash()
	}
	return out
}

// runWriterFindings checks that each run's writer_id names a recorded
// session that was open when the run was created, and each status change a
// recorded session. Findings are keyed by run.
func (s *Store) runWriterFindings(ctx context.Context, writers []Writer) (map[string][]finding, error) {
	byID := map[int64]Writer{}
	for _, w := range writers {
		byID[w.WriterID] = w
	}
	out := map[string][]finding{}
	rows, err := s.conn.QueryContext(ctx, `SELECT run_id, writer_id, created_at FROM runs WHERE writer_id IS NOT NULL ORDER BY ordinal`)
	if err != nil {
		return nil, fmt.Errorf("evidence: verify run writers: %w", err)
	}
	for rows.Next() {
		var id string
		var wid int64
		var created time.Time
		if err := rows.Scan(&id, &wid, &created); err != nil {
			rows.Close()
			return nil, fmt.Errorf("evidence: verify run writers: %w", err)
		}
		w, ok := byID[wid]
		switch {
		case !ok:
			out[id] = append(out[id], finding{VerifyTampered, fmt.Sprintf("runs.writer_id names writer %d, which is not recorded", wid)})
		case created.Before(w.OpenedAt) || (w.ClosedAt != nil && created.After(*w.ClosedAt)):
			out[id] = append(out[id], finding{VerifyTampered, fmt.Sprintf("runs.writer_id names writer %d, whose session (from %s) did not hold the store when the run was created (%s)",
				wid, w.OpenedAt.Format(time.RFC3339Nano), created.UTC().Format(time.RFC3339Nano))})
		}
	}
	if err := rows.Close(); err != nil {
		return nil, fmt.Errorf("evidence: verify run writers: %w", err)
	}
	rows, err = s.conn.QueryContext(ctx, `SELECT run_id, ordinal, writer_id FROM run_status_changes ORDER BY run_id, ordinal`)
	if err != nil {
		return nil, fmt.Errorf("evidence: verify status changes: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var id string
		var ord, wid int64
		if err := rows.Scan(&id, &ord, &wid); err != nil {
			return nil, fmt.Errorf("evidence: verify status changes: %w", err)
		}
		if _, ok := byID[wid]; !ok {
			out[id] = append(out[id], finding{VerifyTampered, fmt.Sprintf("status change %d names writer %d, which is not recorded", ord, wid)})
		}
	}
	return out, rows.Err()
}

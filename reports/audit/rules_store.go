package audit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/assay-audit/assay/evidence"
)

const zeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// chainQueries re-derive the store-wide chains' continuity and links in SQL: each returns the rows
// that break (ordinal, key, what).
var chainQueries = []struct{ table, query string }{
	{"admissions", `SELECT ordinal, run_id, CASE WHEN ordinal <> rn THEN 'ordinal ' || ordinal || ' where ' || rn || ' was due: an admission is missing' ELSE 'prev_hash does not link to admission ' || (ordinal - 1) END
		FROM (SELECT ordinal, run_id, prev_hash, row_number() OVER (ORDER BY ordinal) AS rn, lag(hash) OVER (ORDER BY ordinal) AS prev FROM admissions)
		WHERE ordinal <> rn OR prev_hash <> coalesce(prev, '` + zeroHash + `') ORDER BY ordinal`},
	{"finalizations", `SELECT ordinal, run_id, CASE WHEN ordinal <> rn THEN 'ordinal ' || ordinal || ' where ' || rn || ' was due: a finalization is missing' ELSE 'prev_hash does not link to finalization ' || (ordinal - 1) END
		FROM (SELECT ordinal, run_id, prev_hash, row_number() OVER (ORDER BY ordinal) AS rn, lag(hash) OVER (ORDER BY ordinal) AS prev FROM finalizations)
		WHERE ordinal <> rn OR prev_hash <> coalesce(prev, '` + zeroHash + `') ORDER BY ordinal`},
	{"writers", `SELECT writer_id, '', CASE WHEN writer_id <> rn THEN 'writer ' || writer_id || ' where ' || rn || ' was due: a writer session is missing' ELSE 'prev_hash does not link to writer ' || (writer_id - 1) END
		FROM (SELECT writer_id, prev_hash, row_number() OVER (ORDER BY writer_id) AS rn, lag(coalesce(close_hash, hash)) OVER (ORDER BY writer_id) AS prev FROM writers)
		WHERE writer_id <> rn OR prev_hash <> coalesce(prev, '` + zeroHash + `') ORDER BY writer_id`},
	{"runs", `SELECT r.ordinal, r.run_id, 'run has no admission at its ordinal' FROM runs r LEFT JOIN admissions a ON a.run_id = r.run_id AND a.ordinal = r.ordinal
		WHERE a.run_id IS NULL ORDER BY r.ordinal`},
}

// runQueries re-derive per-run invariants: (run_id, seq, what).
var runQueries = []struct{ table, query string }{
	{"events", `SELECT run_id, seq, 'seq ' || seq || ' where ' || rn || ' was due' FROM (SELECT run_id, seq, row_number() OVER (PARTITION BY run_id ORDER BY seq) AS rn FROM events) WHERE seq <> rn ORDER BY run_id, seq`},
	{"events", `SELECT run_id, seq, 'prev_hash does not link to event ' || (seq - 1) FROM (SELECT run_id, seq, prev_hash, lag(hash) OVER (PARTITION BY run_id ORDER BY seq) AS prev FROM events)
		WHERE prev_hash <> coalesce(prev, '` + zeroHash + `') ORDER BY run_id, seq`},
	{"events", `SELECT run_id, seq, 'causal parent ' || parent || ' is not before it' FROM events WHERE parent < 0 OR parent >= seq ORDER BY run_id, seq`},
	{"checkpoints", `SELECT c.run_id, c.seq, 'checkpoint follows event ' || c.seq || ', whose hash is not the one it recorded' FROM checkpoints c LEFT JOIN events e ON e.run_id = c.run_id AND e.seq = c.seq
		WHERE c.seq > 0 AND (e.hash IS NULL OR e.hash <> c.event_hash) ORDER BY c.run_id, c.seq`},
}

func ruleR09() *Rule {
	return &Rule{
		ID: "R09", Title: "Store invariants broken (single-writer discipline bypassed)", Severity: Critical,
		Hazard: "DuckDB single-writer discipline bypassed",
		Doc: "Re-derives in SQL the store's invariants that a write outside the guarded store breaks: the admissions, " +
			"finalizations and writer-session chains gap-free from 1 with each prev_hash linking to its predecessor; every " +
			"run admitted at its ordinal; each selected run's events numbered 1..n, each prev_hash linking to the previous " +
			"event's hash, each causal parent before its event; each checkpoint bound to the hash of the event it follows. " +
			"It also runs the store's own verification (evidence.Store.VerifyWith, which recomputes every hash and checks " +
			"the schema, keys and blocks) and reports what it finds about the store itself: damage, a broken store-wide " +
			"chain, a deleted run, an unfinalized run whose chain breaks. It never reads a stored status.",
		Procedure: "SQL window queries over admissions, finalizations, writers, runs, events, checkpoints; evidence.Store.VerifyWith",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			out := Outcome{Subject: "runs (with the store-wide chains)"}
			for _, q := range chainQueries {
				rows, err := in.Query(ctx, q.query)
				if err != nil {
					return Outcome{}, err
				}
				for _, row := range rows {
					ord, _ := asInt(row[0])
					out.Findings = append(out.Findings, Finding{RunID: asString(row[1]),
						Message:  fmt.Sprintf("%s %d: %s", q.table, ord, asString(row[2])),
						Evidence: []Row{{RunID: asString(row[1]), Table: q.table, Key: fmt.Sprint(ord)}}})
				}
			}
			for _, q := range runQueries {
				rows, err := in.Query(ctx, q.query)
				if err != nil {
					return Outcome{}, err
				}
				for _, row := range rows {
					id := asString(row[0])
					if !in.isSelected(id) && in.Run(id) != nil {
						continue
					}
					seq, _ := asInt(row[1])
					out.Findings = append(out.Findings, Finding{RunID: id,
						Message:  fmt.Sprintf("run %s %s %d: %s", id, q.table, seq, asString(row[2])),
						Evidence: []Row{{RunID: id, Table: q.table, Seq: seq}}})
				}
			}
			vs, err := in.Verification(ctx)
			if err != nil {
				return Outcome{}, err
			}
			for _, v := range vs {
				r := in.Run(v.RunID)
				storeLevel := v.RunID == "" || r == nil || v.Status == evidence.VerifyDamaged
				openTampered := r != nil && r.TerminalHash == "" && v.Status == evidence.VerifyTampered
				if !storeLevel && !openTampered {
					continue
				}
				what := v.RunID
				if what == "" {
					what = "store"
				}
				out.Findings = append(out.Findings, Finding{RunID: v.RunID,
					Message:  fmt.Sprintf("%s: verification recomputed %s: %s", what, v.Status, v.Detail),
					Evidence: []Row{{RunID: v.RunID, Table: v.Table, Key: v.Row, Value: v.Status, Seq: v.FirstBadSeq}}})
			}
			// Evaluated counts runs, never queries: a store with no run has evaluated nothing
			// (not_assessable unless a store-level finding was made), however many chains were read.
			out.Evaluated = len(in.sel)
			return out, nil
		},
	}
}

func ruleR11() *Rule {
	return &Rule{
		ID: "R11", Title: "Artifact payload missing or corrupt", Severity: Critical,
		Hazard: "artifact metadata remains but the payload is missing or corrupt",
		Doc: "For every artifact a selected run links (run_artifacts), reads the payload itself — the inline bytes from " +
			"the artifacts table, or the file under artifacts/sha256/ — recomputes its SHA-256 and size and compares them " +
			"with the digest and size recorded; a row or file that is gone is missing. Every digest an event payload names " +
			"under a key artifact or *_artifact must be linked to the run. The records outside the store a run is bound to " +
			"(run_bindings) are recomputed by the store's verification; its corrupt_payload and missing_payload results are " +
			"findings too.",
		Procedure: "run_artifacts ⟕ artifacts: sha256(data or file) vs digest; events payload *_artifact ∈ run_artifacts; evidence.Store.VerifyWith",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			out := Outcome{Subject: "artifact links"}
			rows, err := in.Query(ctx, `SELECT l.run_id, l.name, l.digest, a.digest IS NULL, coalesce(a.storage, ''), a.size,
				a.data IS NULL, coalesce(sha256(a.data), ''), coalesce(octet_length(a.data), 0)
				FROM run_artifacts l LEFT JOIN artifacts a USING (digest) ORDER BY l.run_id, l.name`)
			if err != nil {
				return Outcome{}, err
			}
			linked := map[string]map[string]bool{}
			for _, row := range rows {
				id, name, digest := asString(row[0]), asString(row[1]), asString(row[2])
				if !in.isSelected(id) {
					continue
				}
				if linked[id] == nil {
					linked[id] = map[string]bool{}
				}
				linked[id][digest] = true
				out.Evaluated++
				ev := []Row{{RunID: id, Table: "run_artifacts", Key: name, Digest: digest}}
				if missing, _ := row[3].(bool); missing {
					out.Findings = append(out.Findings, Finding{RunID: id, Message: fmt.Sprintf("run %s links %s to sha256:%s, which has no artifacts row", id, name, digest), Evidence: ev})
					continue
				}
				size, _ := asInt(row[5])
				got, n, problem := payloadDigest(in, asString(row[4]), digest, row[6], asString(row[7]), row[8])
				if problem == "" && got != digest {
					problem = "its payload hashes to " + got
				} else if problem == "" && n != size {
					problem = fmt.Sprintf("its payload is %d bytes, the row says %d", n, size)
				}
				if problem != "" {
					out.Findings = append(out.Findings, Finding{RunID: id, Message: fmt.Sprintf("run %s artifact %s (sha256:%s): %s", id, name, digest, problem), Evidence: ev})
				}
			}
			for _, r := range in.Runs() {
				evs, err := in.Events(ctx, r.RunID)
				if err != nil {
					return Outcome{}, err
				}
				for _, ev := range evs {
					for k, v := range payload(ev) {
						d, ok := v.(string)
						if !ok || (k != "artifact" && !strings.HasSuffix(k, "_artifact")) || linked[r.RunID][d] {
							continue
						}
						out.Findings = append(out.Findings, Finding{RunID: r.RunID,
							Message:  fmt.Sprintf("run %s event %d (%s) names %s %s, which the run does not link", r.RunID, ev.Seq, ev.Type, k, d),
							Evidence: []Row{{RunID: r.RunID, Table: "events", Seq: ev.Seq, Key: k, Digest: d}}})
					}
				}
			}
			vs, err := in.Verification(ctx)
			if err != nil {
				return Outcome{}, err
			}
			for _, v := range vs {
				if in.Run(v.RunID) == nil || (v.Status != evidence.VerifyCorruptPayload && v.Status != evidence.VerifyMissingPayload) {
					continue
				}
				out.Findings = append(out.Findings, Finding{RunID: v.RunID,
					Message:  fmt.Sprintf("run %s: verification recomputed %s: %s", v.RunID, v.Status, v.Detail),
					Evidence: []Row{{RunID: v.RunID, Table: "run_bindings", Value: v.Status}}})
			}
			return out, nil
		},
	}
}

// payloadDigest returns the SHA-256 and size of an artifact's payload, read by the path its storage
// names: an inline payload hashed by DuckDB's sha256 in the query (sum, n), a file read and hashed
// here; problem says why it cannot be read ("" when it was).
func payloadDigest(in *Input, storage, digest string, inlineNull any, sum string, n any) (string, int64, string) {
	switch storage {
	case evidence.StorageInline:
		if null, _ := inlineNull.(bool); null {
			return "", 0, "its inline payload is NULL"
		}
		size, _ := asInt(n)
		return sum, size, ""
	case evidence.StorageFile:
		path := in.store.ArtifactPath(digest)
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return "", 0, "its payload file " + path + " does not exist"
		}
		if err != nil {
			return "", 0, "its payload file cannot be read: " + err.Error()
		}
		h := sha256.Sum256(b)
		return hex.EncodeToString(h[:]), int64(len(b)), ""
	}
	return "", 0, fmt.Sprintf("unknown storage %q", storage)
}

func ruleR12() *Rule {
	return &Rule{
		ID: "R12", Title: "Finalized trace mutated or extended", Severity: Critical,
		Hazard: "a finalized trace is mutated or extended",
		Doc: "For every finalized or sealed run in the selection (one with a terminal hash), counts its events in SQL and " +
			"compares the count and the last seq with the event count fixed at finalization; requires its last event to " +
			"be run_finalized with nothing after it (terminal versions 3 and 5); requires its entry in the finalizations " +
			"chain to hold the same terminal hash. The store's verification recomputes the terminal hash over every row " +
			"the run owns; a finalized run it finds tampered is a finding, with its detail.",
		Procedure: "runs.event_count vs count(events), max(seq); last event type; finalizations.terminal_hash; evidence.Store.VerifyWith",
		Check: func(ctx context.Context, in *Input) (Outcome, error) {
			out := Outcome{Subject: "finalized runs"}
			rows, err := in.Query(ctx, `SELECT r.run_id, r.event_count, r.terminal_hash, coalesce(r.terminal_version, 0),
				(SELECT count(*) FROM events e WHERE e.run_id = r.run_id), (SELECT coalesce(max(seq), 0) FROM events e WHERE e.run_id = r.run_id),
				coalesce((SELECT type FROM events e WHERE e.run_id = r.run_id ORDER BY seq DESC LIMIT 1), ''),
				coalesce((SELECT f.terminal_hash FROM finalizations f WHERE f.run_id = r.run_id), '')
				FROM runs r WHERE r.terminal_hash IS NOT NULL ORDER BY r.ordinal`)
			if err != nil {
				return Outcome{}, err
			}
			for _, row := range rows {
				id := asString(row[0])
				if !in.isSelected(id) {
					continue
				}
				out.Evaluated++
				fixed, _ := asInt(row[1])
				th := asString(row[2])
				version, _ := asInt(row[3])
				count, _ := asInt(row[4])
				last, _ := asInt(row[5])
				add := func(msg string, ev ...Row) {
					out.Findings = append(out.Findings, Finding{RunID: id, Message: msg, Evidence: ev})
				}
				if count != fixed || last != fixed {
					add(fmt.Sprintf("finalized run %s fixed %d events, the store now holds %d (last seq %d)", id, fixed, count, last),
						Row{RunID: id, Table: "runs", Key: "event_count", Value: fmt.Sprint(fixed), Digest: th},
						Row{RunID: id, Table: "events", Seq: last, Value: fmt.Sprint(count)})
				}
				if version >= 3 && asString(row[6]) != evidence.EventRunFinalized {
					add(fmt.Sprintf("finalized run %s's last event (seq %d) is %q, not run_finalized: its trace was extended", id, last, asString(row[6])),
						Row{RunID: id, Table: "events", Seq: last, Key: asString(row[6])})
				}
				if version >= 5 && asString(row[7]) != th {
					add(fmt.Sprintf("finalized run %s's terminal hash %s differs from its finalizations entry's %q", id, th, asString(row[7])),
						Row{RunID: id, Table: "runs", Key: "terminal_hash", Digest: th},
						Row{RunID: id, Table: "finalizations", Key: "terminal_hash", Digest: asString(row[7])})
				}
			}
			vs, err := in.Verification(ctx)
			if err != nil {
				return Outcome{}, err
			}
			for _, v := range vs {
				r := in.Run(v.RunID)
				if r == nil || r.TerminalHash == "" || v.Status != evidence.VerifyTampered {
					continue
				}
				out.Findings = append(out.Findings, Finding{RunID: v.RunID,
					Message:  fmt.Sprintf("finalized run %s: verification recomputed tampered: %s", v.RunID, v.Detail),
					Evidence: []Row{{RunID: v.RunID, Table: "runs", Key: "terminal_hash", Digest: r.TerminalHash, Seq: v.FirstBadSeq}}})
			}
			return out, nil
		},
	}
}

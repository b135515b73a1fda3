package indexer

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"unicode"

	"github.com/assay-audit/assay/internal/safefile"
)

// The reuse decision: a database is reused when it is byte for byte what
// its index wrote (its recorded SHA-256) and the content key it stores
// equals the key of the same files and directories now (key.go). Anything
// else indexes.

// reusable returns the snapshot of the database at dbPath, with Reused
// set, when it can be reused for the context kc; otherwise why not
// (Snapshot.FullReason). Errors are ctx's only: a database or file that
// cannot be read is a reason to index.
func reusable(ctx context.Context, dbPath string, kc keyContext) (Snapshot, string, error) {
	recorded, ok, why := verifyRecordedSHA256(dbPath)
	if !ok {
		return Snapshot{}, why, nil
	}
	prev, stored, storedHash, err := readStoredKey(ctx, dbPath)
	if err != nil {
		return Snapshot{}, "the previous database cannot be read: " + err.Error(), nil
	}
	switch {
	case stored.Format != keyFormat:
		return Snapshot{}, "the previous database's content key has another layout (written by another version of assay)", nil
	case stored.None != "":
		return Snapshot{}, "the previous index recorded no content key: " + stored.None, nil
	}
	cur, err := stored.current(ctx, kc, dbPath)
	if err != nil {
		if ctx.Err() != nil {
			return Snapshot{}, "", err
		}
		return Snapshot{}, "the content key cannot be computed: " + err.Error(), nil
	}
	key, err := cur.hash()
	if err != nil {
		return Snapshot{}, "", err
	}
	if key != storedHash {
		return Snapshot{}, change(stored, cur, kc.Dir), nil
	}
	prev.DBSHA256, prev.Reused = recorded, true
	return prev, "", nil
}

// readStoredKey reads the snapshot and the content key stored in the
// database at dbPath: the key as it was hashed (storedHash) and what it was
// computed from.
func readStoredKey(ctx context.Context, dbPath string) (prev Snapshot, k contentKey, storedHash string, err error) {
	db, err := OpenDatabase(ctx, dbPath)
	if err != nil {
		return Snapshot{}, contentKey{}, "", err
	}
	defer db.Close()
	if prev, err = readSnapshot(ctx, db, dbPath); err != nil {
		return Snapshot{}, contentKey{}, "", err
	}
	var raw string
	if err := db.QueryRowContext(ctx, "SELECT key, check_json FROM reuse_check").Scan(&storedHash, &raw); err != nil {
		return Snapshot{}, contentKey{}, "", fmt.Errorf("read its content key: %w", err)
	}
	if err := json.Unmarshal([]byte(raw), &k); err != nil {
		return Snapshot{}, contentKey{}, "", fmt.Errorf("decode its content key: %w", err)
	}
	return prev, k, storedHash, nil
}

// insertReuseCheck stores the content key (hash "" when there is none)
// and what it was computed from.
func insertReuseCheck(ctx context.Context, tx *Tx, hash string, k contentKey) error {
	raw, err := json.Marshal(k)
	if err != nil {
		return fmt.Errorf("encode content key: %w", err)
	}
	if _, err := tx.ExecContext(ctx, "INSERT INTO reuse_check (key, check_json) VALUES (?, ?)", hash, string(raw)); err != nil {
		return fmt.Errorf("insert content key: %w", err)
	}
	return nil
}

// sha256Path is where Index records the SHA-256 of the database at dbPath
// once it is written: beside it, among its own files (dbPath-*).
func sha256Path(dbPath string) string { return dbPath + "-sha256" }

// verifyRecordedSHA256 reports whether the database at dbPath has the
// SHA-256 its index recorded, and returns that record; otherwise it says
// why not (for Snapshot.FullReason). The record is read only if it is a
// small regular file (not through a symbolic link, never blocking on a
// FIFO) holding 64 lowercase hex digits.
func verifyRecordedSHA256(dbPath string) (recorded string, ok bool, why string) {
	rec, err := safefile.ReadSmall(sha256Path(dbPath), 128)
	if errors.Is(err, fs.ErrNotExist) {
		return "", false, fmt.Sprintf("the database has no SHA-256 record (%s) to check it against: it is not reused", filepath.Base(sha256Path(dbPath)))
	}
	if err != nil {
		return "", false, fmt.Sprintf("the database's SHA-256 record %s cannot be used (%v): it is not reused", filepath.Base(sha256Path(dbPath)), err)
	}
	recorded = strings.TrimSpace(string(rec))
	if !sha256Hex.MatchString(recorded) {
		return "", false, fmt.Sprintf("the database's SHA-256 record %s does not hold a SHA-256: it is not reused", filepath.Base(sha256Path(dbPath)))
	}
	f, err := os.Open(dbPath)
	if err != nil {
		return "", false, fmt.Sprintf("the database cannot be read: %v", err)
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", false, fmt.Sprintf("the database cannot be read: %v", err)
	}
	if got := hex.EncodeToString(h.Sum(nil)); got != recorded {
		return "", false, fmt.Sprintf("the database's SHA-256 %s is not the %s its index wrote (damaged or edited since): it is not reused", got, recorded)
	}
	return recorded, true, ""
}

// sha256Hex is a SHA-256 as Index writes it: 64 lowercase hex digits.
var sha256Hex = regexp.MustCompile(`^[0-9a-f]{64}$`)

// change says what differs between prev, a stored key, and cur, the same
// scope's key now, for Snapshot.FullReason: the recorded configuration
// (naming the fields), then the files, then the directories (naming the
// first and counting the rest). Paths under dir are shown relative to it.
func change(prev, cur contentKey, dir string) string {
	if d := contextChange(prev.Inputs.Context, cur.Inputs.Context); d != "" {
		return d
	}
	rel := func(p string) string {
		if r, err := filepath.Rel(dir, p); err == nil && !strings.HasPrefix(r, "..") {
			return r
		}
		return p
	}
	describe := func(what string, prev, cur map[string]string, noun string) string {
		var changed []string
		for _, p := range slices.Sorted(maps.Keys(prev)) {
			if prev[p] != cur[p] {
				changed = append(changed, p)
			}
		}
		if len(changed) == 0 {
			return ""
		}
		p := changed[0]
		var s string
		switch {
		case prev[p] == modifiedWhileIndexed:
			s = fmt.Sprintf("%s %s was modified while the last index read it", what, shown(rel(p)))
		case cur[p] == missing:
			s = fmt.Sprintf("%s %s was removed since the last index", what, shown(rel(p)))
		case prev[p] == missing:
			s = fmt.Sprintf("%s %s appeared since the last index", what, shown(rel(p)))
		default:
			s = fmt.Sprintf("%s %s changed since the last index%s", what, shown(rel(p)), noun)
		}
		if len(changed) > 1 {
			s += fmt.Sprintf(" (and %d more)", len(changed)-1)
		}
		return s
	}
	if d := describe("file", prev.Inputs.Files, cur.Inputs.Files, ""); d != "" {
		return d
	}
	if d := describe("directory", prev.Inputs.Tree, cur.Inputs.Tree, " (an entry was added, removed or renamed)"); d != "" {
		return d
	}
	return "the content key changed"
}

// contextChange names the fields of the key's context that differ between
// prev and cur, "the configuration changed: root directory /a -> /b; build
// tags [] -> [extra]", or returns "" when none does.
func contextChange(prev, cur keyContext) string {
	var diffs []string
	diff := func(what string, a, b any) {
		if sa, sb := shown(fmt.Sprint(a)), shown(fmt.Sprint(b)); sa != sb {
			diffs = append(diffs, fmt.Sprintf("%s %s -> %s", what, sa, sb))
		}
	}
	diff("root directory", prev.Dir, cur.Dir)
	diff("schema version", prev.SchemaVersion, cur.SchemaVersion)
	diff("tool version", prev.ToolVersion, cur.ToolVersion)
	diff("enrichment", prev.EnrichID, cur.EnrichID)
	diff("tests", prev.Tests, cur.Tests)
	diff("patterns", prev.Patterns, cur.Patterns)
	diff("build tags", prev.Tags, cur.Tags)
	pe, ce := envFields(prev.Env), envFields(cur.Env)
	for _, name := range goEnvNames {
		what := name
		if name == "GOVERSION" {
			what = "Go version"
		}
		diff(what, pe[name], ce[name])
	}
	diff("VCS revision", prev.VCSRevision, cur.VCSRevision)
	if prev.VCSRevision == cur.VCSRevision {
		diff("VCS dirty", prev.VCSDirty, cur.VCSDirty)
	}
	if len(diffs) == 0 {
		return ""
	}
	return "the configuration changed: " + strings.Join(diffs, "; ")
}

// envFields returns the go env values by the names `go env` gives them.
func envFields(e goEnv) map[string]string {
	b, _ := json.Marshal(e) // a struct of strings: never fails
	m := map[string]string{}
	_ = json.Unmarshal(b, &m)
	return m
}

// shown is s as a message may show a value read from a database or the
// file system: quoted when it holds a character that is not printable (a
// terminal escape, a newline).
func shown(s string) string {
	if strings.ContainsFunc(s, func(r rune) bool { return !unicode.IsPrint(r) }) {
		return strconv.Quote(s)
	}
	return s
}

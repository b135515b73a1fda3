package evidence

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"
	"unicode/utf8"

	"github.com/assay-audit/assay/internal/atomicfile"
	filedigest "github.com/assay-audit/assay/internal/digest"
)

// InlineLimit is the largest artifact (in bytes, 256 KiB) stored inline in the
// database; larger payloads go to files under <dir of db>/artifacts/sha256.
const InlineLimit = 256 << 10

// Artifact storage kinds (artifacts.storage).
const (
	StorageInline = "inline"
	StorageFile   = "file"
)

// maxArtifactName bounds artifact link names (bytes).
const maxArtifactName = 1024

// ArtifactPath returns where a file-backed artifact with this digest lives:
// <dir of db>/artifacts/sha256/<first 2 hex>/<remaining 62 hex>, or "" when
// digest is not SHA-256 hex (64 lowercase chars).
func (s *Store) ArtifactPath(digest string) string {
	if !isDigest(digest) {
		return ""
	}
	return filepath.Join(s.dir, "artifacts", "sha256", digest[:2], digest[2:])
}

// PutArtifact stores data content-addressed and links it to run runID under
// name (e.g. "cases/double.go", "provider/response/exec-1/0") with mediaType
// ("" means "application/octet-stream"). It returns the SHA-256 hex digest.
//
// Up to InlineLimit bytes are stored in the database; larger payloads are
// written to ArtifactPath(digest) atomically (temp file, fsync, rename, fsync
// of the directory) before the database row refers to them. Storing the same
// content again reuses it; linking the same name to the same content again is
// a no-op.
//
// Errors: *FieldError (ErrInvalidArgument) for an empty or over-long name;
// ErrArtifactNameTaken when the run already links name to other content;
// ErrNoRun; ErrFinalized; ErrRunNotOpen; ErrReadOnly; ErrClosed; I/O errors
// naming the payload path.
func (s *Store) PutArtifact(ctx context.Context, runID, name, mediaType string, data []byte) (string, error) {
	if name == "" || len(name) > maxArtifactName || !utf8.ValidString(name) {
		return "", fieldErr(ErrInvalidArgument, "name", "artifact name must be 1..%d bytes of UTF-8", maxArtifactName)
	}
	if mediaType == "" {
		mediaType = "application/octet-stream"
	}
	if !utf8.ValidString(mediaType) || len(mediaType) > 255 {
		return "", fieldErr(ErrInvalidArgument, "media_type", "must be at most 255 bytes of UTF-8")
	}
	digest := sha256Hex(data)
	if err := s.beginWrite(ctx); err != nil {
		return "", err
	}
	defer s.mu.Unlock()
	if err := writableRun(ctx, s.conn, runID); err != nil {
		return "", err
	}
	var linked string
	err := s.conn.QueryRowContext(ctx, `SELECT digest FROM run_artifacts WHERE run_id = ? AND name = ?`, runID, name).Scan(&linked)
	switch {
	case err == nil && linked == digest:
		return digest, nil
	case err == nil:
		return "", fmt.Errorf("evidence: run %s artifact %q is sha256:%s, not sha256:%s: %w", runID, name, linked, digest, ErrArtifactNameTaken)
	case !errors.Is(err, sql.ErrNoRows):
		return "", fmt.Errorf("evidence: run %s artifact %q: %w", runID, name, err)
	}
	storage := StorageInline
	var inline []byte
	if len(data) > InlineLimit {
		storage = StorageFile
		if err := s.writePayloadFile(digest, data); err != nil {
			return "", err
		}
	} else {
		inline = data
		if inline == nil {
			inline = []byte{}
		}
	}
	tx, err := s.conn.BeginTx(ctx, nil)
	if err != nil {
		return "", fmt.Errorf("evidence: put artifact %q in run %s: %w", name, runID, err)
	}
	defer tx.Rollback()
	now := utcMicro(time.Now())
	var existing int
	if err := tx.QueryRowContext(ctx, `SELECT count(*) FROM artifacts WHERE digest = ?`, digest).Scan(&existing); err != nil {
		return "", fmt.Errorf("evidence: put artifact sha256:%s: %w", digest, err)
	}
	if existing == 0 {
		var blob any
		if storage == StorageInline {
			blob = inline
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO artifacts (digest, size, storage, data, created_at) VALUES (?, ?, ?, ?, ?)`,
			digest, int64(len(data)), storage, blob, now); err != nil {
			return "", fmt.Errorf("evidence: put artifact sha256:%s: %w", digest, err)
		}
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO run_artifacts (run_id, name, digest, media_type, linked_at) VALUES (?, ?, ?, ?, ?)`,
		runID, name, digest, mediaType, now); err != nil {
		return "", fmt.Errorf("evidence: link artifact %q to run %s: %w", name, runID, err)
	}
	if err := tx.Commit(); err != nil {
		return "", fmt.Errorf("evidence: put artifact %q in run %s: %w", name, runID, err)
	}
	return digest, nil
}

// writePayloadFile writes data, read-only (0444), to its content-addressed
// path (internal/atomicfile) unless a file there already holds exactly that
// content.
func (s *Store) writePayloadFile(digest string, data []byte) error {
	path := s.ArtifactPath(digest)
	if sum, err := filedigest.File(path); err == nil && sum == digest {
		return nil
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("evidence: artifact directory %s: %w", dir, err)
	}
	if err := atomicfile.Write(path, data, 0o444); err != nil {
		return fmt.Errorf("evidence: artifact: %w", err)
	}
	return nil
}

// Artifact returns the payload with this digest (SHA-256 hex) after verifying
// that it still hashes to the digest. Works on a read-only store.
//
// Errors: *FieldError (ErrInvalidArgument) when digest is not 64 lowercase
// hex chars; *ArtifactError wrapping ErrArtifactMissing (no row, or the
// payload file is gone) or ErrArtifactCorrupt (content hashes differently);
// ErrClosed.
func (s *Store) Artifact(ctx context.Context, digest string) ([]byte, error) {
	if !isDigest(digest) {
		return nil, fieldErr(ErrInvalidArgument, "digest", "%q is not SHA-256 hex (64 lowercase chars)", digest)
	}
	if err := s.beginRead(); err != nil {
		return nil, err
	}
	defer s.mu.Unlock()
	return s.readArtifact(ctx, s.conn, digest)
}

// readArtifact loads and verifies one payload.
func (s *Store) readArtifact(ctx context.Context, q queryer, digest string) ([]byte, error) {
	var size int64
	var storage string
	var inline []byte
	var isNull bool
	err := q.QueryRowContext(ctx, `SELECT size, storage, data, data IS NULL FROM artifacts WHERE digest = ?`, digest).Scan(&size, &storage, &inline, &isNull)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, &ArtifactError{Digest: digest, Err: ErrArtifactMissing, Detail: "no artifacts row"}
	}
	if err != nil {
		return nil, fmt.Errorf("evidence: artifact sha256:%s: %w", digest, err)
	}
	data, path := inline, ""
	switch storage {
	case StorageInline:
		if isNull {
			return nil, &ArtifactError{Digest: digest, Err: ErrArtifactMissing, Detail: "inline payload is NULL"}
		}
	case StorageFile:
		path = s.ArtifactPath(digest)
		data, err = os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, &ArtifactError{Digest: digest, Path: path, Err: ErrArtifactMissing, Detail: "payload file does not exist"}
		}
		if err != nil {
			return nil, fmt.Errorf("evidence: read artifact sha256:%s from %s: %w", digest, path, err)
		}
	default:
		return nil, &ArtifactError{Digest: digest, Err: ErrArtifactCorrupt, Detail: fmt.Sprintf("unknown storage %q", storage)}
	}
	sum := sha256.Sum256(data)
	if got := hex.EncodeToString(sum[:]); got != digest {
		return nil, &ArtifactError{Digest: digest, Path: path, Err: ErrArtifactCorrupt, Detail: "content hashes to " + got}
	}
	if int64(len(data)) != size {
		return nil, &ArtifactError{Digest: digest, Path: path, Err: ErrArtifactCorrupt, Detail: fmt.Sprintf("size %d != recorded %d", len(data), size)}
	}
	return data, nil
}

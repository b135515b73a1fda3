package evidence

import (
	"errors"
	"fmt"
)

// Sentinel errors. Every refusal the store makes wraps one of these, so callers
// test with errors.Is; the typed errors below carry the details (path, pid,
// field, digest) and unwrap to the matching sentinel.
var (
	// ErrLocked: another process holds the store's lock. Returned wrapped in a
	// *LockedError naming the holder.
	ErrLocked = errors.New("evidence store is locked")
	// ErrNoStore: nothing exists at the store path given to a call that never
	// creates a store (Open with ReadOnly, Migrate, ExportParquet). Returned in
	// a *NoStoreError, which also unwraps to the fs.ErrNotExist of the lookup.
	ErrNoStore = errors.New("no evidence store")
	// ErrBadQuery: the SQL statement given to Query was refused or failed as a
	// statement (syntax, binding, a write on the read-only connection, a
	// conversion error), as opposed to the store failing to read (I/O, out of
	// memory, interruption). Returned in a *QueryError.
	ErrBadQuery = errors.New("query refused or failed")
	// ErrNotStore: the file is not a DuckDB database, or is a DuckDB database
	// that is not an assay evidence store (no meta table, wrong app marker).
	ErrNotStore = errors.New("not an assay evidence store")
	// ErrSchemaVersion: the store's schema version is not the one this build
	// supports. Returned wrapped in a *SchemaVersionError.
	ErrSchemaVersion = errors.New("unsupported evidence store schema version")
	// ErrReadOnly: a write was attempted on a store opened with ReadOnly.
	ErrReadOnly = errors.New("evidence store is open read-only")
	// ErrNotReadOnly: Query was called on a store opened for writing; user SQL
	// only runs on a read-only store.
	ErrNotReadOnly = errors.New("open the store read-only to query it")
	// ErrMultipleStatements: Query was given more than one SQL statement.
	ErrMultipleStatements = errors.New("query must be exactly one SQL statement")
	// ErrQueryParameters: Query was given a statement with parameters ($1, ?, $name), which it has
	// no values to bind (a QueryError).
	ErrQueryParameters = errors.New("the query has parameters ($1, ?, $name) and nothing binds them: write the values into the query")
	// ErrNoStatement: Query was given no SQL statement, only comments (a QueryError).
	ErrNoStatement = errors.New("the query is only a comment: there is no SQL statement to run")
	// ErrClosed: the Store was used after Close.
	ErrClosed = errors.New("evidence store is closed")
	// ErrNoRun: the named run does not exist.
	ErrNoRun = errors.New("no such run")
	// ErrRunExists: OpenRun was given a run id that is already taken.
	ErrRunExists = errors.New("run already exists")
	// ErrFinalized: a write targeted a finalized (immutable) run.
	ErrFinalized = errors.New("run is finalized")
	// ErrRunNotOpen: a write targeted a run that is neither open nor finalized
	// (status "interrupted").
	ErrRunNotOpen = errors.New("run is not open")
	// ErrInvalidEvent: AppendEvent was given an event that cannot be stored.
	// Returned wrapped in a *FieldError naming the field.
	ErrInvalidEvent = errors.New("invalid event")
	// ErrInvalidEnvelope: OpenRun was given an envelope missing a required field
	// or holding a malformed one. Returned wrapped in a *FieldError.
	ErrInvalidEnvelope = errors.New("invalid envelope")
	// ErrInvalidArgument: any other malformed argument (run id, digest, check,
	// usage row, verdict, artifact name). Returned wrapped in a *FieldError.
	ErrInvalidArgument = errors.New("invalid argument")
	// ErrArtifactMissing: the artifact's payload is not in the store (no row, or
	// its file under artifacts/sha256 is gone). Wrapped in an *ArtifactError.
	ErrArtifactMissing = errors.New("artifact missing")
	// ErrArtifactCorrupt: the artifact's payload no longer hashes to its digest.
	// Wrapped in an *ArtifactError.
	ErrArtifactCorrupt = errors.New("artifact corrupt")
	// ErrArtifactNameTaken: PutArtifact linked a name that the run already links
	// to different content. Evidence is never silently replaced.
	ErrArtifactNameTaken = errors.New("artifact name already linked to other content")
	// ErrCheckExists: RecordCheck was called twice for the same check name in a
	// run. A check result is evidence; it is never overwritten to obtain a pass.
	ErrCheckExists = errors.New("check already recorded")
	// ErrCheckpointExists: SaveCheckpoint was called twice for the same seq.
	ErrCheckpointExists = errors.New("checkpoint already saved")
	// ErrNoCheckpoint: LoadCheckpoint found no such checkpoint.
	ErrNoCheckpoint = errors.New("no such checkpoint")
	// ErrCheckpointCorrupt: a checkpoint's hash, or the event it follows, no
	// longer verifies. Wrapped in a *CheckpointError.
	ErrCheckpointCorrupt = errors.New("checkpoint does not verify")
	// ErrEnvelopeMismatch: a resuming request differs from the envelope of the
	// checkpoint's run. Wrapped in an *EnvelopeMismatchError.
	ErrEnvelopeMismatch = errors.New("resuming request does not match the run's envelope")
	// ErrUsageContradicted: RecordUsageVerdicts was given a "conserved" verdict
	// that the run's recorded usage rows do not support.
	ErrUsageContradicted = errors.New("usage verdict contradicted by recorded usage")
	// ErrDamaged: the store file is a DuckDB database that cannot be read as
	// one (truncated, a block whose checksum fails, a table or column missing):
	// damage, not bad input. Returned in a *DamagedError.
	ErrDamaged = errors.New("evidence store is damaged")
	// ErrBindingExists: BindExternal was called twice for the same source of
	// a run; a binding is evidence and is never replaced.
	ErrBindingExists = errors.New("binding already recorded")
)

// DamagedError reports that the store file, or a table of it, cannot be read
// as the schema says it should. Table is "" when the file as a whole is
// unreadable. It unwraps to ErrDamaged.
type DamagedError struct {
	Path   string // the store path
	Table  string // the table that cannot be read; "" for the file
	Reason string // what is wrong, in assay's words (the database engine's message follows in parentheses when it helps)
}

func (e *DamagedError) Error() string {
	if e.Table == "" {
		return fmt.Sprintf("evidence store %s is damaged: %s", e.Path, e.Reason)
	}
	return fmt.Sprintf("evidence store %s is damaged: table %s: %s", e.Path, e.Table, e.Reason)
}

// Unwrap returns ErrDamaged.
func (e *DamagedError) Unwrap() error { return ErrDamaged }

// LockedError reports that another process holds the store's lock file
// (<path>.lock). PID and Command are read from the lock file, where a writer
// records them; both are zero/empty when the holder is a reader or has not
// recorded itself yet. It unwraps to ErrLocked.
type LockedError struct {
	Path    string // the store path as given to Open
	PID     int    // holder's process id; 0 when unknown
	Command string // holder's command line as recorded; "" when unknown
}

// Error names the store and its holder. It says nothing of how to wait: that
// is OpenOptions.Wait to a caller, and a flag to a command's user.
func (e *LockedError) Error() string {
	if e.PID > 0 {
		cmd := e.Command
		if cmd == "" {
			cmd = "unknown command"
		}
		return fmt.Sprintf("evidence store %s is open for writing by pid %d (%s)", e.Path, e.PID, cmd)
	}
	return fmt.Sprintf("evidence store %s is locked by another process (a reader, or a writer that has not recorded its pid)", e.Path)
}

// Unwrap returns ErrLocked.
func (e *LockedError) Unwrap() error { return ErrLocked }

// NoStoreError reports that no file exists at Path, the store path given to a
// call that never creates a store. It unwraps to ErrNoStore and to Err, the
// lookup's error (wrapping fs.ErrNotExist).
type NoStoreError struct {
	Path string // the store path as given
	Err  error  // the lookup's error, wrapping fs.ErrNotExist
}

func (e *NoStoreError) Error() string { return "evidence: no evidence store at " + e.Path }

// Unwrap returns ErrNoStore and Err.
func (e *NoStoreError) Unwrap() []error { return []error{ErrNoStore, e.Err} }

// QueryError reports a statement Query refused or that failed as a statement
// (see ErrBadQuery). Err is DuckDB's error (a *duckdb.Error) or the driver's
// refusal of a second statement. It unwraps to ErrBadQuery and to Err.
type QueryError struct {
	Err error
}

func (e *QueryError) Error() string { return "evidence: query refused or failed: " + e.Err.Error() }

// Unwrap returns ErrBadQuery and Err.
func (e *QueryError) Unwrap() []error { return []error{ErrBadQuery, e.Err} }

// SchemaVersionError reports a store whose schema_version differs from the one
// this build supports. Newer files are refused rather than misread. It unwraps
// to ErrSchemaVersion.
type SchemaVersionError struct {
	Path      string // the store path
	Found     int    // schema_version recorded in the file
	Supported int    // schema version this build reads and writes
}

func (e *SchemaVersionError) Error() string {
	if e.Found > e.Supported {
		return fmt.Sprintf("evidence store %s has schema version %d, newer than the supported version %d; upgrade assay to read it", e.Path, e.Found, e.Supported)
	}
	return fmt.Sprintf("evidence store %s has schema version %d, older than the supported version %d; it must be migrated (Migrate) to be read", e.Path, e.Found, e.Supported)
}

// Unwrap returns ErrSchemaVersion.
func (e *SchemaVersionError) Unwrap() error { return ErrSchemaVersion }

// FieldError names the field of an argument that was refused and why. Kind is
// the sentinel it unwraps to: ErrInvalidEvent, ErrInvalidEnvelope or
// ErrInvalidArgument.
type FieldError struct {
	Kind   error  // one of ErrInvalidEvent, ErrInvalidEnvelope, ErrInvalidArgument
	Field  string // e.g. "payload", "parent", "manifest_digest", "run_id"
	Reason string // e.g. "not a JSON object"
}

func (e *FieldError) Error() string {
	return fmt.Sprintf("%v: field %s: %s", e.Kind, e.Field, e.Reason)
}

// Unwrap returns Kind.
func (e *FieldError) Unwrap() error { return e.Kind }

// ArtifactError names the artifact (by digest and, for file-backed payloads,
// path) that is missing or corrupt. Err is ErrArtifactMissing or
// ErrArtifactCorrupt.
type ArtifactError struct {
	Digest string // SHA-256 hex of the expected content
	Path   string // payload file path; "" when the payload is inline
	Err    error  // ErrArtifactMissing or ErrArtifactCorrupt
	Detail string // what was observed, e.g. "content hashes to 3b1f..."
}

func (e *ArtifactError) Error() string {
	msg := fmt.Sprintf("%v: sha256:%s", e.Err, e.Digest)
	if e.Path != "" {
		msg += " (" + e.Path + ")"
	}
	if e.Detail != "" {
		msg += ": " + e.Detail
	}
	return msg
}

// Unwrap returns Err.
func (e *ArtifactError) Unwrap() error { return e.Err }

func fieldErr(kind error, field, format string, args ...any) error {
	return &FieldError{Kind: kind, Field: field, Reason: fmt.Sprintf(format, args...)}
}

package evidence

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sort"
	"time"

	"github.com/assay-audit/assay/internal/atomicfile"
)

// ManifestFormat identifies the manifest file format.
const ManifestFormat = "assay-evidence-manifest/1"

// ErrManifestRefused: a manifest was requested for a store with runs that do
// not verify; writing one would certify tampered evidence.
var ErrManifestRefused = errors.New("manifest refused: runs do not verify")

// ErrBadManifest: the manifest file to check against is missing (also
// fs.ErrNotExist), is not JSON, has another format, or holds a malformed run
// entry. A manifest that cannot be read for another reason (a permission, an
// I/O error) is not this error.
var ErrBadManifest = errors.New("not a usable manifest")

// Manifest lists finalized runs and their terminal hashes, to be kept apart
// from the store (another machine, a signed commit, a ticket): replacing the
// whole database file with a consistent forgery changes terminal hashes,
// which CheckManifest then reports.
type Manifest struct {
	Format        string        `json:"format"`         // ManifestFormat
	Store         string        `json:"store"`          // the store path it was written from (informational)
	SchemaVersion int           `json:"schema_version"` // of the store
	CreatedAt     string        `json:"created_at"`     // RFC 3339, UTC
	Runs          []ManifestRun `json:"runs"`           // ordered by run id
}

// ManifestRun is one finalized, verified run.
type ManifestRun struct {
	RunID        string `json:"run_id"`
	TerminalHash string `json:"terminal_hash"` // SHA-256 hex
	EventCount   int64  `json:"event_count"`
}

// Manifest check outcomes (RunVerification.Manifest).
const (
	ManifestMatch    = "match"    // listed with the same terminal hash
	ManifestDiffers  = "differs"  // listed with another terminal hash, or no longer finalized
	ManifestMissing  = "missing"  // listed but absent from the store
	ManifestUnlisted = "unlisted" // in the store but not in the manifest (e.g. finalized later)
)

// BuildManifest makes a manifest of the runs in results (Verify's output)
// whose status is "ok". Unfinalized runs are left out. It refuses with
// ErrManifestRefused when any run is tampered or has a missing or corrupt
// payload.
func BuildManifest(storePath string, results []RunVerification) (Manifest, error) {
	m := Manifest{Format: ManifestFormat, Store: storePath, SchemaVersion: SchemaVersion,
		CreatedAt: time.Now().UTC().Format(time.RFC3339), Runs: []ManifestRun{}}
	var bad []string
	for _, r := range results {
		switch r.Status {
		case VerifyOK:
			m.Runs = append(m.Runs, ManifestRun{RunID: r.RunID, TerminalHash: r.TerminalHash, EventCount: r.Events})
		case VerifyUnfinalized:
		default:
			bad = append(bad, r.RunID+" "+r.Status)
		}
	}
	if len(bad) > 0 {
		return Manifest{}, fmt.Errorf("%w: %v", ErrManifestRefused, bad)
	}
	sort.Slice(m.Runs, func(i, j int) bool { return m.Runs[i].RunID < m.Runs[j].RunID })
	return m, nil
}

// WriteManifest writes m as indented JSON to path atomically (internal/atomicfile:
// temp file in the same directory, fsync, rename, directory fsync), mode 0600.
// Errors name path.
func WriteManifest(path string, m Manifest) error {
	data, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return fmt.Errorf("evidence: encode manifest: %w", err)
	}
	if err := atomicfile.Write(path, append(data, '\n'), 0o600); err != nil {
		return fmt.Errorf("evidence: manifest: %w", err)
	}
	return nil
}

// ReadManifest reads and validates a manifest file. Errors name the path and
// wrap ErrBadManifest for a missing file (and fs.ErrNotExist), one that is not
// JSON, of another format, or with a malformed run entry; another read error
// is wrapped as it is.
func ReadManifest(path string) (Manifest, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Manifest{}, fmt.Errorf("evidence: %w: no manifest at %s (%w)", ErrBadManifest, path, err)
	}
	if err != nil {
		return Manifest{}, fmt.Errorf("evidence: read manifest: %w", err)
	}
	var m Manifest
	if err := json.Unmarshal(data, &m); err != nil {
		return Manifest{}, fmt.Errorf("evidence: %w: %s is not JSON: %v", ErrBadManifest, path, err)
	}
	if m.Format != ManifestFormat {
		return Manifest{}, fmt.Errorf("evidence: %w: %s has format %q, not %q", ErrBadManifest, path, m.Format, ManifestFormat)
	}
	for i, r := range m.Runs {
		if !validRunID(r.RunID) || !isDigest(r.TerminalHash) {
			return Manifest{}, fmt.Errorf("evidence: %w: %s: runs[%d] needs a run id and a SHA-256 terminal hash", ErrBadManifest, path, i)
		}
	}
	return m, nil
}

// CheckManifest compares Verify's results with m and returns them with
// Manifest set on each, plus one "tampered" entry for every run m lists that
// the results lack (when all is true, i.e. results cover the whole store; with
// all false only runs present in results are compared). A run whose terminal
// hash differs from m's, or that m lists but is no longer finalized, becomes
// "tampered": the database no longer holds the evidence the manifest vouched
// for.
func CheckManifest(m Manifest, results []RunVerification, all bool) []RunVerification {
	listed := map[string]ManifestRun{}
	for _, r := range m.Runs {
		listed[r.RunID] = r
	}
	out := make([]RunVerification, 0, len(results))
	seen := map[string]bool{}
	for _, r := range results {
		seen[r.RunID] = true
		mr, ok := listed[r.RunID]
		switch {
		case !ok:
			r.Manifest = ManifestUnlisted
		case r.TerminalHash == mr.TerminalHash && r.TerminalHash != "":
			r.Manifest = ManifestMatch
		default:
			r.Manifest = ManifestDiffers
			r.Status = VerifyTampered
			got := r.TerminalHash
			if got == "" {
				got = "none (not finalized)"
			}
			r.Detail = fmt.Sprintf("terminal hash %s differs from the manifest's %s; %s", got, mr.TerminalHash, r.Detail)
		}
		out = append(out, r)
	}
	if all {
		for _, mr := range m.Runs {
			if !seen[mr.RunID] {
				out = append(out, RunVerification{RunID: mr.RunID, Status: VerifyTampered, Manifest: ManifestMissing,
					Detail: fmt.Sprintf("listed in the manifest with terminal hash %s but missing from the store", mr.TerminalHash)})
			}
		}
	}
	return out
}

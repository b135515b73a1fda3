package reports

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/gowebpki/jcs"

	"github.com/assay-audit/assay/evidence"
)

// The artifacts a case run stores (harness.TaskArtifact and the harness's manifest artifact;
// reports does not import harness).
const (
	taskArtifact     = "task.yaml"
	manifestArtifact = "manifest.json"
)

// TaskFile statuses: what re-reading a run's stored evidence says of the task file it ran.
const (
	// TaskFileMatches: the stored manifest hashes to the envelope's manifest digest, and the stored
	// task.yaml's bytes hash to the SHA-256 that manifest binds.
	TaskFileMatches = "matches"
	// TaskFileMismatch: the stored task.yaml's bytes hash to another SHA-256 than the manifest binds.
	TaskFileMismatch = "mismatch"
	// TaskFileMissing: the manifest binds a task file the run did not store.
	TaskFileMissing = "missing"
	// TaskFileNotBound: the manifest binds no task file (a run recorded before task files, which ran
	// the built-in default task): its bytes cannot be shown.
	TaskFileNotBound = "not_bound"
	// TaskFileManifestMismatch: the stored manifest does not hash to the envelope's manifest digest,
	// so the task it names is not what the run was bound to.
	TaskFileManifestMismatch = "manifest_mismatch"
	// TaskFileNoManifest: the run stored no case manifest (a replay run keeps the one of the run it
	// replays), or it does not decode.
	TaskFileNoManifest = "no_manifest"
	// TaskFileNotApplicable: an observe run whose bound manifest names no task: it executed no task
	// (`assay usage reconcile --into` records an external system's usage this way).
	TaskFileNotApplicable = "not_applicable"
	// TaskFileUnreadable: the store could not give back the stored manifest or task.yaml (a
	// corrupt or missing payload): nothing about the task file can be said.
	TaskFileUnreadable = "unreadable"
	// TaskFileUnverified: the stored bytes agree with each other, but the run's evidence does not
	// verify (or the report was built with --no-verify), so nothing ties them to what ran.
	TaskFileUnverified = "unverified"
)

// TaskFile is the task file a case run was bound to, read only from the run's stored evidence,
// never from what the runtime said: the stored case manifest (manifest.json), re-hashed as RFC 8785
// canonical JSON and compared with the envelope's manifest digest, names the task and the SHA-256
// of its file's bytes; the stored task.yaml is hashed again and compared with it. Hashes are full
// SHA-256 hex (64 chars), never truncated; "" when there is none.
type TaskFile struct {
	// Name is the task the manifest names ("double"); "" when there is no manifest.
	Name string `json:"name"`
	// SHA256 is the SHA-256 of the task file's bytes as the manifest binds it.
	SHA256 string `json:"sha256"`
	// StoredSHA256 is the SHA-256 of the task.yaml bytes the run stored, computed when the report
	// was built; "" when it stored none.
	StoredSHA256 string `json:"stored_sha256"`
	// Status is one of the TaskFile* constants.
	Status string `json:"status"`
	// ReferenceSolution is the manifest's word that the embedded reference provider answered the
	// case by writing the task file's reference solution back (it is not a model); nil when the
	// manifest does not say (no task bound, or no manifest).
	ReferenceSolution *bool `json:"reference_solution"`
	// Detail says in words what Status means for this run.
	Detail string `json:"detail"`
	// CheckFindings are what the run's checks recorded about its task file ("tests: unknown: the
	// run's recorded task file cannot be re-derived ..."), in check order; empty when none did.
	CheckFindings []string `json:"check_findings"`
}

// Verified reports whether the task file's SHA-256 is backed by the stored evidence.
func (t TaskFile) Verified() bool { return t.Status == TaskFileMatches }

// taskFile re-reads run r's task file from its stored manifest and task.yaml; checks are the run's
// recorded checks (their findings about the task file are quoted). Errors: the store's, reading an
// artifact it lists.
func (l *loader) taskFile(ctx context.Context, r evidence.RunSummary, checks []Check) (TaskFile, error) {
	tf := TaskFile{CheckFindings: []string{}}
	for _, ch := range checks {
		if strings.Contains(ch.Detail, "task file") {
			tf.CheckFindings = append(tf.CheckFindings, fmt.Sprintf("%s: %s: %s", ch.Name, ch.Status, ch.Detail))
		}
	}
	read := func(name string) ([]byte, bool, error) {
		i := slices.IndexFunc(r.Artifacts, func(a evidence.ArtifactLink) bool { return a.Name == name })
		if i < 0 {
			return nil, false, nil
		}
		b, err := l.store.Artifact(ctx, r.Artifacts[i].Digest)
		if err != nil {
			return nil, false, fmt.Errorf("reports: run %s: %s: %w", r.RunID, name, err)
		}
		return b, true, nil
	}
	unreadable := func(err error) (TaskFile, error) {
		if ctx.Err() != nil {
			return TaskFile{}, err
		}
		tf.Status = TaskFileUnreadable
		tf.Detail = "the store could not give back what the run stored: " + err.Error()
		return tf, nil
	}
	mb, ok, err := read(manifestArtifact)
	if err != nil {
		return unreadable(err)
	}
	var m struct {
		Task *struct {
			Name              string `json:"name"`
			SHA256            string `json:"sha256"`
			ReferenceSolution bool   `json:"reference_solution"`
		} `json:"task"`
	}
	if !ok || json.Unmarshal(mb, &m) != nil {
		tf.Status = TaskFileNoManifest
		tf.Detail = "the run stored no case manifest that decodes (a replay run keeps the one of the run it replays): its task file is not recorded with it"
		return tf, nil
	}
	if m.Task != nil {
		tf.Name, tf.SHA256 = m.Task.Name, m.Task.SHA256
	}
	// The envelope binds the manifest by the SHA-256 of its RFC 8785 canonical form (the matrix's
	// case manifests) or of its exact stored bytes (a usage-claims run's); either ties these bytes
	// to the envelope.
	if !boundManifest(mb, r.Envelope.ManifestDigest) {
		tf.Status = TaskFileManifestMismatch
		tf.Detail = "the stored manifest does not hash to the envelope's manifest digest: the task it names is not what the run was bound to"
		return tf, nil
	}
	if m.Task == nil && r.Envelope.Mode == evidence.ModeObserve {
		tf.Status = TaskFileNotApplicable
		tf.Detail = "an observe run whose manifest names no task: it executed none (it records an external system's usage)"
		return tf, nil
	}
	if tf.SHA256 == "" {
		tf.Status = TaskFileNotBound
		tf.Detail = "the manifest binds no task file (recorded before task files: the built-in default task, whose bytes it does not bind)"
		return tf, nil
	}
	refSol := m.Task.ReferenceSolution
	tf.ReferenceSolution = &refSol
	tb, ok, err := read(taskArtifact)
	if err != nil {
		return unreadable(err)
	}
	switch {
	case !ok:
		tf.Status = TaskFileMissing
		tf.Detail = "the manifest binds a task file the run did not store (" + taskArtifact + "): its tests and oracle cannot be re-derived"
	case sha256Hex(tb) != tf.SHA256:
		tf.StoredSHA256 = sha256Hex(tb)
		tf.Status = TaskFileMismatch
		tf.Detail = "the stored " + taskArtifact + " hashes to " + tf.StoredSHA256 + ", not to the SHA-256 the manifest binds: its tests and oracle cannot be re-derived"
	default:
		tf.StoredSHA256 = tf.SHA256
		tf.Status = TaskFileMatches
		tf.Detail = "the stored " + taskArtifact + " hashes to the SHA-256 the manifest binds, and the manifest to the envelope's digest"
	}
	return tf, nil
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// boundManifest reports whether manifest's bytes hash to digest, as they are or in RFC 8785
// canonical form.
func boundManifest(manifest []byte, digest string) bool {
	if sha256Hex(manifest) == digest {
		return true
	}
	canon, err := jcs.Transform(manifest)
	return err == nil && sha256Hex(canon) == digest
}

// unverified is t as a case whose evidence does not verify (or was not verified) shows it: a
// task file that matches its manifest is only self-consistent there, never "matches".
func (t TaskFile) unverified(why string) TaskFile {
	if t.Status != TaskFileMatches {
		return t
	}
	t.Status = TaskFileUnverified
	t.Detail = "the stored " + taskArtifact + " hashes to the SHA-256 its manifest binds, but " + why + ": nothing ties them to what ran"
	return t
}

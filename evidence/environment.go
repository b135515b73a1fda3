package evidence

import (
	"encoding/json"
	"fmt"
)

// EnvironmentArtifact is the name a run's environment preimage is linked
// under (schema v6 runs of the harness): the exact bytes
// Envelope.EnvironmentFingerprint is the SHA-256 of, so a reader can show
// what the fingerprint covers and re-derive it instead of trusting it.
const EnvironmentArtifact = "environment.json"

// EnvironmentFingerprintV2 is the fingerprint definition that records the
// build's version control facts. Version 1 (runs recorded before schema v6)
// is the same object without "fingerprint_version" and the vcs keys, so an
// Environment with FingerprintVersion 0 and no vcs facts hashes to the
// version 1 fingerprint.
const EnvironmentFingerprintV2 = 2

// Environment is the preimage of an environment fingerprint: the facts of the
// machine and build that decide how a case runs. Its canonical form (RFC 8785
// JSON of the keys below, empty optional keys omitted) is what the
// fingerprint is the SHA-256 hex of.
type Environment struct {
	// FingerprintVersion is 0 (omitted) for version 1, EnvironmentFingerprintV2 otherwise.
	FingerprintVersion int `json:"fingerprint_version,omitempty"`
	// Assay is assay's version string as the CLI reports it, e.g. "0.4.0" or "dev".
	Assay string `json:"assay"`
	// Go is the Go toolchain that built assay, e.g. "go1.26.8".
	Go     string `json:"go"`
	GOOS   string `json:"goos"`
	GOARCH string `json:"goarch"`
	// VCSRevision, VCSTime and VCSModified are the build's vcs.revision (commit
	// hash), vcs.time (RFC 3339) and vcs.modified (a dirty work tree) from
	// runtime/debug.ReadBuildInfo; empty/nil when the build did not record
	// them (a test binary, `go run`), which means unknown, not clean.
	VCSRevision string `json:"vcs_revision,omitempty"`
	VCSTime     string `json:"vcs_time,omitempty"`
	VCSModified *bool  `json:"vcs_modified,omitempty"`
}

// Canonical returns the RFC 8785 canonical JSON of e, the bytes stored as
// EnvironmentArtifact and hashed by Fingerprint.
func (e Environment) Canonical() ([]byte, error) {
	b, err := canonical(e)
	if err != nil {
		return nil, fmt.Errorf("evidence: canonicalize environment: %w", err)
	}
	return b, nil
}

// Fingerprint returns the environment fingerprint of e: SHA-256 hex (64
// lowercase chars) of Canonical.
func (e Environment) Fingerprint() (string, error) {
	b, err := e.Canonical()
	if err != nil {
		return "", err
	}
	return sha256Hex(b), nil
}

// ParseEnvironment decodes a stored EnvironmentArtifact. The fingerprint it
// re-derives is SHA-256 of the stored bytes themselves (a reader compares
// that with the envelope's); ParseEnvironment only reports what they say.
// Errors: the bytes are not a JSON object of Environment's keys.
func ParseEnvironment(b []byte) (Environment, error) {
	var e Environment
	if err := json.Unmarshal(b, &e); err != nil {
		return Environment{}, fmt.Errorf("evidence: environment preimage: %w", err)
	}
	return e, nil
}

// FingerprintOf returns SHA-256 hex of b, as an environment fingerprint is
// computed over its stored preimage.
func FingerprintOf(b []byte) string { return sha256Hex(b) }

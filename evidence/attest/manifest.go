package attest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/atomicfile"
)

// WriteManifest writes m to path atomically: signed by s as a DSSE envelope
// (payload type PayloadTypeManifest, the manifest's JSON) when s is not nil,
// else as the manifest's indented JSON (evidence.WriteManifest). A manifest
// that does not Validate is refused.
func WriteManifest(ctx context.Context, path string, m evidence.Manifest, s *Signer) error {
	if s == nil {
		return evidence.WriteManifest(path, m)
	}
	if err := m.Validate(); err != nil {
		return fmt.Errorf("attest: write manifest %s: %w", path, err)
	}
	payload, err := json.Marshal(m)
	if err != nil {
		return fmt.Errorf("attest: encode manifest: %w", err)
	}
	line, err := s.sign(ctx, PayloadTypeManifest, payload)
	if err != nil {
		return err
	}
	return atomicfile.Write(path, append(line, '\n'), 0o644)
}

// ReadManifest reads the manifest at path. With v set the manifest must be
// signed by v's key (a DSSE envelope whose signature verifies); an unsigned
// one is refused: a manifest anyone can edit cannot stand for one that had
// to be signed. With v nil the manifest must be unsigned: a signed one is
// refused until its key is given, so that a signature is never taken on
// trust. It reports whether the manifest was signed.
//
// Errors wrap evidence.ErrBadManifest (a missing file also fs.ErrNotExist):
// missing, not a manifest, empty, inconsistent with its checkpoint, unsigned
// although v is given, signed although v is nil, or a signature that does not
// verify.
func ReadManifest(ctx context.Context, path string, v *Verifier) (evidence.Manifest, bool, error) {
	data, err := os.ReadFile(path)
	if errors.Is(err, fs.ErrNotExist) {
		return evidence.Manifest{}, false, fmt.Errorf("attest: %w: no manifest at %s (%w)", evidence.ErrBadManifest, path, err)
	}
	if fi, serr := os.Stat(path); serr == nil && !fi.Mode().IsRegular() {
		return evidence.Manifest{}, false, fmt.Errorf("attest: %w: %s is not a regular file", evidence.ErrBadManifest, path)
	}
	if err != nil {
		return evidence.Manifest{}, false, fmt.Errorf("attest: read manifest: %w", err)
	}
	var probe struct {
		PayloadType *string `json:"payloadType"`
	}
	signed := json.Unmarshal(data, &probe) == nil && probe.PayloadType != nil
	switch {
	case signed && v == nil:
		return evidence.Manifest{}, true, fmt.Errorf("attest: %w: %s is signed: give the public key to check its signature", evidence.ErrBadManifest, path)
	case !signed && v != nil:
		return evidence.Manifest{}, false, fmt.Errorf("attest: %w: %s is not signed, and a signature by key %s is required", evidence.ErrBadManifest, path, v.KeyID())
	case !signed:
		m, err := evidence.ParseManifest(data)
		if err != nil {
			return evidence.Manifest{}, false, fmt.Errorf("attest: manifest %s: %w", path, err)
		}
		return m, false, nil
	}
	payload, err := v.open(ctx, data, PayloadTypeManifest)
	if err != nil {
		return evidence.Manifest{}, true, fmt.Errorf("attest: %w: %s: %v", evidence.ErrBadManifest, path, err)
	}
	m, err := evidence.ParseManifest(payload)
	if err != nil {
		return evidence.Manifest{}, true, fmt.Errorf("attest: signed manifest %s: %w", path, err)
	}
	return m, true, nil
}

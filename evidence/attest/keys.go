// Package attest signs what the evidence store holds so that someone who can
// write the store cannot rewrite it unnoticed: each finalized run as an in-toto
// Statement v1 (github.com/in-toto/attestation) in a DSSE envelope
// (github.com/secure-systems-lab/go-securesystemslib/dsse), and the store's
// manifest (evidence.Manifest) in a DSSE envelope, both with an Ed25519 key
// (RFC 8032). The store's own hashes are unkeyed: anyone with write access can
// recompute them. A signature made with a key kept elsewhere cannot be.
//
// Attestations are files outside the store (one DSSE envelope per line of a
// "*.intoto.jsonl" file); docs/trust.md says what they prove and what not.
package attest

import (
	"crypto/ed25519"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"github.com/secure-systems-lab/go-securesystemslib/signerverifier"

	"github.com/assay-audit/assay/internal/atomicfile"
)

// ErrBadKey: a key file is missing, unreadable, not PEM, or not an Ed25519 key
// of the kind asked for (a private key to sign, a public key to verify).
var ErrBadKey = errors.New("unusable key")

// ErrKeyExists: Keygen refuses to overwrite a key file.
var ErrKeyExists = errors.New("key file exists")

// Signer signs with an Ed25519 private key. Safe for concurrent use.
type Signer struct {
	keyID    string
	env      *dsse.EnvelopeSigner
	verifier *Verifier // the same key's public part
}

// Verifier returns a Verifier for the signer's own public key.
func (s *Signer) Verifier() *Verifier { return s.verifier }

// KeyID is the key's securesystemslib key id: SHA-256 hex of the canonical
// JSON of its public part, as DSSE envelopes name it.
func (s *Signer) KeyID() string { return s.keyID }

// Verifier checks signatures with an Ed25519 public key. Safe for concurrent use.
type Verifier struct {
	keyID string
	env   *dsse.EnvelopeVerifier
}

// KeyID is the key id signatures by this key carry.
func (v *Verifier) KeyID() string { return v.keyID }

// Keygen writes a new Ed25519 key pair: the private key to privPath as a
// PKCS #8 "PRIVATE KEY" PEM block (mode 0600) and the public key to
// privPath+".pub" as a PKIX "PUBLIC KEY" PEM block (mode 0644), the formats
// OpenSSL and securesystemslib read. It returns the public key's path and
// key id. Errors: ErrKeyExists when either file exists; I/O errors.
func Keygen(privPath string) (pubPath, keyID string, err error) {
	pubPath = privPath + ".pub"
	for _, p := range []string{privPath, pubPath} {
		if _, err := os.Lstat(p); err == nil {
			return "", "", fmt.Errorf("attest: %w: %s (choose another path; a key is never overwritten)", ErrKeyExists, p)
		} else if !errors.Is(err, fs.ErrNotExist) {
			return "", "", fmt.Errorf("attest: %s: %w", p, err)
		}
	}
	if err := os.MkdirAll(filepath.Dir(privPath), 0o700); err != nil {
		return "", "", fmt.Errorf("attest: key directory: %w", err)
	}
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return "", "", fmt.Errorf("attest: generate key: %w", err)
	}
	privDER, err := x509.MarshalPKCS8PrivateKey(priv)
	if err != nil {
		return "", "", fmt.Errorf("attest: encode private key: %w", err)
	}
	pubDER, err := x509.MarshalPKIXPublicKey(pub)
	if err != nil {
		return "", "", fmt.Errorf("attest: encode public key: %w", err)
	}
	if err := atomicfile.Write(privPath, pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: privDER}), 0o600); err != nil {
		return "", "", err
	}
	if err := atomicfile.Write(pubPath, pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}), 0o644); err != nil {
		return "", "", err
	}
	v, err := LoadVerifier(pubPath)
	if err != nil {
		return "", "", err
	}
	return pubPath, v.KeyID(), nil
}

// loadKey reads an Ed25519 key through securesystemslib.
func loadKey(path string, private bool) (*signerverifier.ED25519SignerVerifier, string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, "", fmt.Errorf("attest: %w: %w", ErrBadKey, err)
	}
	key, err := signerverifier.LoadKey(data)
	if err != nil {
		return nil, "", fmt.Errorf("attest: %w: %s: %v", ErrBadKey, path, err)
	}
	if key.KeyType != signerverifier.ED25519KeyType {
		return nil, "", fmt.Errorf("attest: %w: %s is a %s key, not ed25519", ErrBadKey, path, key.KeyType)
	}
	if private && key.KeyVal.Private == "" {
		return nil, "", fmt.Errorf("attest: %w: %s is a public key; signing needs the private key", ErrBadKey, path)
	}
	if !private && key.KeyVal.Private != "" {
		return nil, "", fmt.Errorf("attest: %w: %s is a private key; give the public key (%s.pub) to verify, and keep the private one apart", ErrBadKey, path, path)
	}
	sv, err := signerverifier.NewED25519SignerVerifierFromSSLibKey(key)
	if err != nil {
		return nil, "", fmt.Errorf("attest: %w: %s: %v", ErrBadKey, path, err)
	}
	return sv, key.KeyID, nil
}

// LoadSigner reads an Ed25519 private key (PKCS #8 PEM, as Keygen writes).
// Errors wrap ErrBadKey.
func LoadSigner(path string) (*Signer, error) {
	sv, id, err := loadKey(path, true)
	if err != nil {
		return nil, err
	}
	env, err := dsse.NewEnvelopeSigner(sv)
	if err != nil {
		return nil, fmt.Errorf("attest: %w: %v", ErrBadKey, err)
	}
	venv, err := dsse.NewEnvelopeVerifier(sv)
	if err != nil {
		return nil, fmt.Errorf("attest: %w: %v", ErrBadKey, err)
	}
	return &Signer{keyID: id, env: env, verifier: &Verifier{keyID: id, env: venv}}, nil
}

// LoadVerifier reads an Ed25519 public key (PKIX PEM, as Keygen writes).
// Errors wrap ErrBadKey.
func LoadVerifier(path string) (*Verifier, error) {
	sv, id, err := loadKey(path, false)
	if err != nil {
		return nil, err
	}
	env, err := dsse.NewEnvelopeVerifier(sv)
	if err != nil {
		return nil, fmt.Errorf("attest: %w: %v", ErrBadKey, err)
	}
	return &Verifier{keyID: id, env: env}, nil
}

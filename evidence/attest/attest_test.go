package attest

import (
	"bufio"
	"context"
	"crypto"
	"crypto/ed25519"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	_ "github.com/duckdb/duckdb-go/v2"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/atomicfile"
	"github.com/assay-audit/assay/internal/storetest"
	"github.com/assay-audit/assay/internal/testroot"
)

// fixtureRoot holds signedCopy's template; TestMain removes it after the tests.
var fixtureRoot string

func TestMain(m *testing.M) {
	os.Exit(testroot.Main(m, "attest-test-", &fixtureRoot))
}

func digest(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func envelope() evidence.Envelope {
	return evidence.Envelope{Tenant: "t", ManifestDigest: digest("manifest"), Mode: evidence.ModeLive,
		EnvironmentFingerprint: digest("env"), ReplayTolerance: "exact", Provider: "reference", Model: "assay-reference-1",
		Formation: "sequential", TaskProfile: "standard", Language: "go"}
}

// writeRun records one run through the store's API: events, an artifact, a
// passed required check, a binding, and finalization with acceptance asked.
func writeRun(t testing.TB, s *evidence.Store, id, corrects string) {
	t.Helper()
	ctx := context.Background()
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.OpenRun(ctx, id, envelope(), corrects))
	for i := 1; i <= 3; i++ {
		_, err := s.AppendEvent(ctx, id, evidence.Event{Type: "step", MemberID: "m1", Payload: json.RawMessage(fmt.Sprintf(`{"i":%d}`, i))})
		must(err)
	}
	_, err := s.PutArtifact(ctx, id, "deliverable/m1/double.go", "text/x-go", []byte("package double // "+id+"\n"))
	must(err)
	must(s.BindExternal(ctx, id, evidence.Binding{Source: "gateway", Locator: json.RawMessage(`{"file":"gateway-usage.db"}`), Records: 2, SHA256: digest(id)}))
	must(s.RecordCheck(ctx, id, evidence.Check{Name: "tests", Required: true, Status: evidence.CheckPassed, Detail: "ok"}))
	_, err = s.Finalize(ctx, id, evidence.Verdict{Verdict: evidence.VerdictAccepted})
	must(err)
}

// fixture is a store with finalized runs and a key pair.
type fixture struct {
	store, key, pub, dir string
}

func newFixture(t testing.TB, runs ...string) fixture {
	t.Helper()
	return newFixtureIn(t, t.TempDir(), runs...)
}

// newFixtureIn is newFixture in directory tmp.
func newFixtureIn(t testing.TB, tmp string, runs ...string) fixture {
	t.Helper()
	f := fixture{store: filepath.Join(tmp, "out", "evidence.duckdb"), key: filepath.Join(tmp, "keys", "assay.key"), dir: filepath.Join(tmp, "attestations")}
	if err := os.MkdirAll(filepath.Dir(f.key), 0o700); err != nil {
		t.Fatal(err)
	}
	var err error
	if f.pub, _, err = Keygen(f.key); err != nil {
		t.Fatal(err)
	}
	s, err := evidence.Open(context.Background(), f.store, evidence.OpenOptions{Command: "test"})
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range runs {
		writeRun(t, s, id, "")
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	return f
}

// signedTemplate is the fixture signedCopy copies: written and signed once per test binary.
var signedTemplate struct {
	once sync.Once
	f    fixture
	err  string
}

// signedCopy returns, in a directory of t's own, a copy of a fixture with runs run-a and run-b
// whose attestations are signed (newFixture, then sign): the store, the key pair and the
// attestations directory, so that a test may change any of them.
func signedCopy(t *testing.T) fixture {
	t.Helper()
	tpl := &signedTemplate
	tpl.once.Do(func() {
		tpl.err = "writing the signed fixture failed in " + t.Name()
		tpl.f = newFixtureIn(t, filepath.Join(fixtureRoot, "signed"), "run-a", "run-b")
		if res, file := tpl.f.sign(t); len(res) != 2 || res[0].Outcome != SignSigned || res[1].Outcome != SignSigned || file == "" {
			t.Fatalf("Sign: %+v %s", res, file)
		}
		tpl.err = ""
	})
	if tpl.err != "" {
		t.Fatal(tpl.err)
	}
	root := filepath.Join(fixtureRoot, "signed")
	dst := t.TempDir()
	if err := os.CopyFS(dst, os.DirFS(root)); err != nil {
		t.Fatal(err)
	}
	moved := func(p string) string { return filepath.Join(dst, must(filepath.Rel(root, p))) }
	return fixture{store: moved(tpl.f.store), key: moved(tpl.f.key), pub: moved(tpl.f.pub), dir: moved(tpl.f.dir)}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

// verified opens the store read-only and verifies every run.
func verified(t testing.TB, path string) (*evidence.Store, []evidence.RunVerification) {
	t.Helper()
	s, err := evidence.Open(context.Background(), path, evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	vs, err := s.Verify(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return s, vs
}

func (f fixture) sign(t testing.TB) ([]SignResult, string) {
	t.Helper()
	s, vs := verified(t, f.store)
	defer s.Close()
	signer, err := LoadSigner(f.key)
	if err != nil {
		t.Fatal(err)
	}
	res, file, err := Sign(context.Background(), s, signer, f.dir, vs)
	if err != nil {
		t.Fatal(err)
	}
	return res, file
}

func (f fixture) check(t testing.TB) map[string]evidence.RunVerification {
	t.Helper()
	s, vs := verified(t, f.store)
	defer s.Close()
	v, err := LoadVerifier(f.pub)
	if err != nil {
		t.Fatal(err)
	}
	out, err := Check(context.Background(), s, v, f.dir, vs, true)
	if err != nil {
		t.Fatal(err)
	}
	m := map[string]evidence.RunVerification{}
	for _, r := range out {
		key := r.RunID
		if key == "" {
			key = r.Table + ":" + r.Row
		}
		t.Logf("%s %s attestation %s: %s", key, r.Status, r.Attestation, r.Detail)
		m[key] = r
	}
	return m
}

// rawExec edits the closed store at path directly (storetest.Exec).
func rawExec(t *testing.T, path string, stmts ...string) { storetest.Exec(t, path, stmts...) }

func TestKeygen(t *testing.T) {
	key := filepath.Join(t.TempDir(), "k")
	pub, id, err := Keygen(key)
	if err != nil {
		t.Fatal(err)
	}
	for path, mode := range map[string]os.FileMode{key: 0o600, pub: 0o644} {
		fi, err := os.Stat(path)
		if err != nil || fi.Mode().Perm() != mode {
			t.Errorf("%s: %v, mode %v, want %v", path, err, fi.Mode().Perm(), mode)
		}
	}
	if len(id) != 64 {
		t.Errorf("key id %q", id)
	}
	if _, _, err := Keygen(key); !errors.Is(err, ErrKeyExists) {
		t.Errorf("Keygen over an existing key: %v", err)
	}
	if _, err := LoadSigner(pub); !errors.Is(err, ErrBadKey) {
		t.Errorf("LoadSigner(public key): %v", err)
	}
	if _, err := LoadVerifier(key); !errors.Is(err, ErrBadKey) {
		t.Errorf("LoadVerifier(private key): %v", err)
	}
	s, err := LoadSigner(key)
	if err != nil || s.KeyID() != id {
		t.Fatalf("LoadSigner: %v, id %s want %s", err, s.KeyID(), id)
	}
}

// independentVerifier checks a DSSE signature with crypto/ed25519 itself,
// outside package attest, for the library's EnvelopeVerifier.
type independentVerifier struct {
	pub   ed25519.PublicKey
	keyID string
}

func (v independentVerifier) Verify(_ context.Context, data, sig []byte) error {
	if !ed25519.Verify(v.pub, data, sig) {
		return errors.New("signature does not verify")
	}
	return nil
}
func (v independentVerifier) KeyID() (string, error)   { return v.keyID, nil }
func (v independentVerifier) Public() crypto.PublicKey { return v.pub }

// loadIndependent parses the PKIX public key and computes its
// securesystemslib key id: SHA-256 of the canonical JSON of
// {"keyid_hash_algorithms", "keytype", "keyval": {"public": hex}, "scheme"}.
func loadIndependent(t *testing.T, pubPath string) independentVerifier {
	t.Helper()
	data, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	block, _ := pem.Decode(data)
	k, err := x509.ParsePKIXPublicKey(block.Bytes)
	if err != nil {
		t.Fatal(err)
	}
	pub := k.(ed25519.PublicKey)
	canon, _ := json.Marshal(map[string]any{"keyid_hash_algorithms": []string{"sha256", "sha512"}, "keytype": "ed25519",
		"keyval": map[string]string{"public": hex.EncodeToString(pub)}, "scheme": "ed25519"})
	sum := sha256.Sum256(canon)
	return independentVerifier{pub: pub, keyID: hex.EncodeToString(sum[:])}
}

// A signed attestation verifies with assay and with the DSSE library's own
// verifier over a key the test loads itself; its statement is a valid in-toto
// Statement v1 whose run subject is the terminal hash the store holds.
func TestSignedAttestationsVerifyIndependently(t *testing.T) {
	f := newFixture(t, "run-a", "run-b")
	res, file := f.sign(t)
	if len(res) != 2 || res[0].Outcome != SignSigned || res[1].Outcome != SignSigned || file == "" {
		t.Fatalf("Sign: %+v %s", res, file)
	}
	for id, v := range f.check(t) {
		if v.Attestation != evidence.AttestationVerified || !v.Passed() {
			t.Errorf("%s: %+v", id, v)
		}
	}
	// Independently.
	iv := loadIndependent(t, f.pub)
	ev, err := dsse.NewEnvelopeVerifier(iv)
	if err != nil {
		t.Fatal(err)
	}
	s, _ := verified(t, f.store)
	fh, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer fh.Close()
	sc := bufio.NewScanner(fh)
	n := 0
	for sc.Scan() {
		var env dsse.Envelope
		if err := json.Unmarshal(sc.Bytes(), &env); err != nil {
			t.Fatal(err)
		}
		if env.PayloadType != "application/vnd.in-toto+json" {
			t.Errorf("payload type %q", env.PayloadType)
		}
		if _, err := ev.Verify(context.Background(), &env); err != nil {
			t.Fatalf("the DSSE library refuses the signature: %v", err)
		}
		payload, err := env.DecodeB64Payload()
		if err != nil {
			t.Fatal(err)
		}
		st := &intoto.Statement{}
		if err := protojson.Unmarshal(payload, st); err != nil {
			t.Fatal(err)
		}
		if err := st.Validate(); err != nil || st.GetType() != intoto.StatementTypeUri {
			t.Fatalf("statement %v: %v", st.GetType(), err)
		}
		runID := strings.TrimPrefix(st.GetSubject()[0].GetName(), "assay-run:")
		r, err := s.Run(context.Background(), runID)
		if err != nil {
			t.Fatal(err)
		}
		if got := st.GetSubject()[0].GetDigest()["sha256"]; got != r.TerminalHash {
			t.Errorf("run %s: signed terminal hash %s, store %s", runID, got, r.TerminalHash)
		}
		if got := st.GetSubject()[1].GetDigest()["sha256"]; got != r.Artifacts[0].Digest {
			t.Errorf("run %s: signed artifact %s, store %s", runID, got, r.Artifacts[0].Digest)
		}
		if v := st.GetPredicate().GetFields()["verdict"].GetStructValue().GetFields()["verdict"].GetStringValue(); v != evidence.VerdictAccepted {
			t.Errorf("run %s: signed verdict %q", runID, v)
		}
		// A byte changed in the payload no longer verifies.
		env.Payload = strings.Replace(env.Payload, env.Payload[10:11], string(rune(env.Payload[10]^1)), 1)
		if _, err := ev.Verify(context.Background(), &env); err == nil {
			t.Error("an edited payload verifies")
		}
		n++
	}
	if n != 2 {
		t.Fatalf("%d attestations in %s", n, file)
	}
	// Signing again signs nothing new.
	res, file = f.sign(t)
	if file != "" || res[0].Outcome != SignAlreadySigned {
		t.Fatalf("second Sign: %+v %s", res, file)
	}
}

// A run appended by someone with write access, chained and finalized by the
// store's own code (so every hash of the store holds), has no signature.
func TestForgedAppendedRunHasNoAttestation(t *testing.T) {
	f := newFixture(t, "run-a")
	f.sign(t)
	s, err := evidence.Open(context.Background(), f.store, evidence.OpenOptions{Command: "forger"})
	if err != nil {
		t.Fatal(err)
	}
	writeRun(t, s, "run-forged", "")
	s.Close()
	_, vs := verified(t, f.store)
	for _, v := range vs {
		if !v.Passed() {
			t.Fatalf("the forged store does not even verify: %+v", v)
		}
	}
	got := f.check(t)
	if v := got["run-forged"]; v.Attestation != evidence.AttestationMissing || v.Passed() {
		t.Errorf("forged run: %+v", v)
	}
	if v := got["run-a"]; !v.Passed() {
		t.Errorf("run-a: %+v", v)
	}
}

func TestAttestationCatchesChangedEvidence(t *testing.T) {
	cases := []struct {
		name  string
		edit  func(t *testing.T, f fixture)
		key   string
		want  string
		words string
	}{
		{"check status edited in the store", func(t *testing.T, f fixture) {
			rawExec(t, f.store, `UPDATE checks SET status = 'failed' WHERE run_id = 'run-a'`)
		}, "run-a", evidence.AttestationDiffers, "predicate checks"},
		{"verdict edited", func(t *testing.T, f fixture) {
			rawExec(t, f.store, `UPDATE verdicts SET reasons = ['waived'] WHERE run_id = 'run-a'`)
		}, "run-a", evidence.AttestationDiffers, "predicate verdict"},
		{"status changed on a finalized run", func(t *testing.T, f fixture) {
			rawExec(t, f.store, `UPDATE runs SET status = 'interrupted' WHERE run_id = 'run-a'`)
		}, "run-a", evidence.AttestationDiffers, "predicate status"},
		{"runs row deleted", func(t *testing.T, f fixture) {
			rawExec(t, f.store, `DELETE FROM runs WHERE run_id = 'run-b'`)
		}, "run-b", evidence.AttestationDiffers, "the run's row is gone"},
		{"run erased from every table", func(t *testing.T, f fixture) {
			var stmts []string
			for _, tb := range []string{"runs", "admissions", "finalizations", "envelopes", "events", "checks", "verdicts", "run_artifacts",
				"run_bindings", "usage", "usage_calls", "usage_verdicts", "checkpoints", "run_status_changes"} {
				stmts = append(stmts, `DELETE FROM `+tb+` WHERE run_id = 'run-b'`)
			}
			rawExec(t, f.store, stmts...)
		}, "run-b", evidence.AttestationUnknownRun, "which the store lacks"},
		{"attestation file edited", func(t *testing.T, f fixture) {
			entries, _ := os.ReadDir(f.dir)
			p := filepath.Join(f.dir, entries[0].Name())
			data, _ := os.ReadFile(p)
			i := strings.Index(string(data), `"payload":"`) + 20
			data[i] ^= 1
			if err := os.WriteFile(p, data, 0o644); err != nil {
				t.Fatal(err)
			}
		}, "run-a", evidence.AttestationMissing, "no attestation"},
		{"attestation file removed", func(t *testing.T, f fixture) {
			if err := os.RemoveAll(f.dir); err != nil {
				t.Fatal(err)
			}
			if err := os.MkdirAll(f.dir, 0o755); err != nil {
				t.Fatal(err)
			}
		}, "run-b", evidence.AttestationMissing, "no attestation"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			f := signedCopy(t)
			tc.edit(t, f)
			got := f.check(t)[tc.key]
			if got.Attestation != tc.want || got.Passed() || !strings.Contains(got.Detail, tc.words) {
				t.Errorf("%s: %+v, want attestation %s with %q", tc.key, got, tc.want, tc.words)
			}
		})
	}
}

// Sign refuses runs that do not verify and runs whose existing attestation no
// longer matches: it never launders a change by signing it.
func TestSignRefusesChangedEvidence(t *testing.T) {
	f := signedCopy(t)
	rawExec(t, f.store, `UPDATE checks SET detail = 'edited' WHERE run_id = 'run-a'`)
	res, file := f.sign(t)
	if file != "" {
		t.Fatalf("Sign wrote %s", file)
	}
	got := map[string]SignResult{}
	for _, r := range res {
		got[r.RunID] = r
	}
	if got["run-a"].Outcome != SignRefused || !strings.Contains(got["run-a"].Detail, "does not verify") {
		t.Errorf("run-a: %+v", got["run-a"])
	}
	if got["run-b"].Outcome != SignAlreadySigned {
		t.Errorf("run-b: %+v", got["run-b"])
	}
}

func TestSignedManifest(t *testing.T) {
	ctx := context.Background()
	f := newFixture(t, "run-a", "run-b")
	s, vs := verified(t, f.store)
	m, err := s.BuildManifest(ctx, vs, true)
	if err != nil {
		t.Fatal(err)
	}
	signer, _ := LoadSigner(f.key)
	v, _ := LoadVerifier(f.pub)
	signedPath := filepath.Join(t.TempDir(), "manifest.json")
	if err := WriteManifest(ctx, signedPath, m, signer); err != nil {
		t.Fatal(err)
	}
	got, signed, err := ReadManifest(ctx, signedPath, v)
	if err != nil || !signed || len(got.Runs) != 2 || !got.Final {
		t.Fatalf("ReadManifest: %+v %v %v", got, signed, err)
	}
	if _, _, err := ReadManifest(ctx, signedPath, nil); !errors.Is(err, evidence.ErrBadManifest) {
		t.Errorf("a signed manifest read without its key: %v", err)
	}
	plain := filepath.Join(t.TempDir(), "plain.json")
	if err := WriteManifest(ctx, plain, m, nil); err != nil {
		t.Fatal(err)
	}
	if _, _, err := ReadManifest(ctx, plain, v); !errors.Is(err, evidence.ErrBadManifest) || !strings.Contains(err.Error(), "not signed") {
		t.Errorf("an unsigned manifest where a signature is required: %v", err)
	}
	// An entry removed from the signed payload breaks the signature; from an
	// unsigned one, the manifest's own checkpoint.
	data, _ := os.ReadFile(signedPath)
	var env dsse.Envelope
	_ = json.Unmarshal(data, &env)
	payload, _ := env.DecodeB64Payload()
	var mm evidence.Manifest
	_ = json.Unmarshal(payload, &mm)
	mm.Runs = mm.Runs[1:]
	edited, _ := json.Marshal(mm)
	env.Payload = encodeB64(edited)
	data, _ = json.Marshal(env)
	_ = os.WriteFile(signedPath, data, 0o644)
	if _, _, err := ReadManifest(ctx, signedPath, v); !errors.Is(err, evidence.ErrBadManifest) || !strings.Contains(err.Error(), "no valid signature") {
		t.Errorf("a signed manifest with an entry removed: %v", err)
	}
	mm.Runs = m.Runs[:1]
	_ = atomicfile.Write(plain, mustJSON(mm), 0o644)
	if _, _, err := ReadManifest(ctx, plain, nil); !errors.Is(err, evidence.ErrBadManifest) || !strings.Contains(err.Error(), "not listed") {
		t.Errorf("an unsigned manifest with an entry removed: %v", err)
	}
	mm.Runs, mm.Checkpoint.Admissions = nil, evidence.ChainHead{Head: evidence.ZeroHash}
	_ = atomicfile.Write(plain, mustJSON(mm), 0o644)
	if _, _, err := ReadManifest(ctx, plain, nil); !errors.Is(err, evidence.ErrBadManifest) || !strings.Contains(err.Error(), "pins no runs") {
		t.Errorf("an empty manifest: %v", err)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

func encodeB64(b []byte) string { return base64.StdEncoding.EncodeToString(b) }

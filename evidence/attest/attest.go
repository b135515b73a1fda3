package attest

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/gowebpki/jcs"
	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/atomicfile"
)

// Payload types of the DSSE envelopes this package writes.
const (
	// PayloadTypeInToto is the DSSE payload type of an in-toto Statement
	// (in-toto attestation framework, "Envelope layer").
	PayloadTypeInToto = "application/vnd.in-toto+json"
	// PayloadTypeManifest is the payload type of a signed evidence.Manifest.
	PayloadTypeManifest = "application/vnd.assay.evidence-manifest+json"
)

// PredicateType identifies the predicate of a run attestation: RunPredicate,
// documented in docs/trust.md.
const PredicateType = "https://github.com/assay-audit/assay/blob/main/docs/trust.md#run-predicate-v1"

// SubjectRunPrefix prefixes the name of a statement's first subject, the run
// itself, whose digest is the run's terminal hash. The other subjects are
// the run's artifacts, named "<run id>/<artifact name>".
const SubjectRunPrefix = "assay-run:"

// FileSuffix ends the name of every attestation file: JSON Lines, one DSSE
// envelope per line (the in-toto bundle convention).
const FileSuffix = ".intoto.jsonl"

// RunPredicate is what a run attestation asserts about a finalized (or
// sealed) run, beside its subjects. Every field is read from the store, so a
// later change of the run's evidence makes the statement differ.
type RunPredicate struct {
	RunID           string            `json:"run_id"`
	Status          string            `json:"status"`           // "finalized", or "interrupted" for a sealed run
	TerminalHash    string            `json:"terminal_hash"`    // SHA-256 hex; also the run subject's digest
	TerminalVersion int               `json:"terminal_version"` // terminal hash definition
	EventCount      int64             `json:"event_count"`
	AdmissionHash   string            `json:"admission_hash"` // the run's hash in the store's admissions chain
	EnvelopeDigest  string            `json:"envelope_digest"`
	Envelope        PredicateEnvelope `json:"envelope"`
	Verdict         PredicateVerdict  `json:"verdict"`
	Checks          []PredicateCheck  `json:"checks"`         // by name
	UsageVerdicts   []PredicateUsage  `json:"usage_verdicts"` // in recording order
	Lineage         PredicateLineage  `json:"lineage"`
	Bindings        []PredicateBind   `json:"bindings"` // records outside the store the run is bound to, by source
}

// PredicateEnvelope is the part of the run's envelope a reader of the
// attestation needs without the store (all of it is bound by EnvelopeDigest).
type PredicateEnvelope struct {
	Tenant         string `json:"tenant"`
	ManifestDigest string `json:"manifest_digest"`
	Mode           string `json:"mode"`
	PolicyDigest   string `json:"policy_digest"`
	Provider       string `json:"provider"`
	Model          string `json:"model"`
	Formation      string `json:"formation"`
	TaskProfile    string `json:"task_profile"`
	Language       string `json:"language"`
}

// PredicateVerdict is the run's acceptance verdict.
type PredicateVerdict struct {
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons"`
}

// PredicateCheck is one acceptance check's outcome.
type PredicateCheck struct {
	Name     string `json:"name"`
	Required bool   `json:"required"`
	Status   string `json:"status"`
}

// PredicateUsage is one session's usage reconciliation.
type PredicateUsage struct {
	MemberID  string `json:"member_id"`
	SessionID string `json:"session_id"`
	Verdict   string `json:"verdict"`
}

// PredicateLineage says which runs this one continues.
type PredicateLineage struct {
	CorrectsRunID string   `json:"corrects_run_id"` // "" when none
	Runs          []string `json:"runs"`            // from the first run of the lineage to this one
}

// PredicateBind is one binding of the run to records outside the store.
type PredicateBind struct {
	Source  string `json:"source"`
	Records int64  `json:"records"`
	SHA256  string `json:"sha256"`
}

// runSource is what statements are built from: the store's runs and
// bindings (an *evidence.Store).
type runSource interface {
	Run(ctx context.Context, runID string) (evidence.RunSummary, error)
	Runs(ctx context.Context) ([]evidence.RunSummary, error)
	Bindings(ctx context.Context, runIDs ...string) (map[string][]evidence.Binding, error)
}

// catalog is every run of a store and its bindings, read once.
type catalog struct {
	byID     map[string]evidence.RunSummary
	order    []string
	bindings map[string][]evidence.Binding
}

func loadCatalog(ctx context.Context, src runSource) (*catalog, error) {
	runs, err := src.Runs(ctx)
	if err != nil {
		return nil, fmt.Errorf("attest: read runs: %w", err)
	}
	bs, err := src.Bindings(ctx)
	if err != nil {
		return nil, fmt.Errorf("attest: read bindings: %w", err)
	}
	c := &catalog{byID: map[string]evidence.RunSummary{}, bindings: bs}
	for _, r := range runs {
		c.byID[r.RunID] = r
		c.order = append(c.order, r.RunID)
	}
	return c, nil
}

// loadCatalogFor reads run runID, the runs of its lineage and its bindings.
func loadCatalogFor(ctx context.Context, src runSource, runID string) (*catalog, error) {
	c := &catalog{byID: map[string]evidence.RunSummary{}}
	for id := runID; id != "" && len(c.order) < 10000; {
		if _, done := c.byID[id]; done {
			break
		}
		r, err := src.Run(ctx, id)
		if err != nil {
			if id != runID {
				break // the lineage names a run the store lacks: the statement says so
			}
			return nil, fmt.Errorf("attest: %w", err)
		}
		c.byID[id] = r
		c.order = append(c.order, id)
		id = r.CorrectsRunID
	}
	bs, err := src.Bindings(ctx, runID)
	if err != nil {
		return nil, fmt.Errorf("attest: read bindings: %w", err)
	}
	c.bindings = bs
	return c, nil
}

// Statement returns the in-toto Statement v1 for run r as the store holds it
// now: subjects the run (its terminal hash) and its artifacts, the predicate a
// RunPredicate. Errors: the run is not finalized or sealed.
func (c *catalog) statement(r evidence.RunSummary) (*intoto.Statement, error) {
	if r.TerminalHash == "" || r.Verdict == nil {
		return nil, fmt.Errorf("attest: run %s is %s, not finalized: there is nothing fixed to sign", r.RunID, r.Status)
	}
	p := RunPredicate{RunID: r.RunID, Status: r.Status, TerminalHash: r.TerminalHash, TerminalVersion: r.TerminalVersion,
		EventCount: r.EventCount, AdmissionHash: r.AdmissionHash, EnvelopeDigest: r.EnvelopeDigest,
		Envelope: PredicateEnvelope{Tenant: r.Envelope.Tenant, ManifestDigest: r.Envelope.ManifestDigest, Mode: r.Envelope.Mode,
			PolicyDigest: r.Envelope.PolicyDigest, Provider: r.Envelope.Provider, Model: r.Envelope.Model, Formation: r.Envelope.Formation,
			TaskProfile: r.Envelope.TaskProfile, Language: r.Envelope.Language},
		Verdict: PredicateVerdict{Verdict: r.Verdict.Verdict, Reasons: append([]string{}, r.Verdict.Reasons...)},
		Checks:  []PredicateCheck{}, UsageVerdicts: []PredicateUsage{}, Bindings: []PredicateBind{},
		Lineage: PredicateLineage{CorrectsRunID: r.CorrectsRunID, Runs: c.lineage(r.RunID)}}
	for _, ch := range r.Checks {
		p.Checks = append(p.Checks, PredicateCheck{Name: ch.Name, Required: ch.Required, Status: ch.Status})
	}
	for _, u := range r.UsageVerdicts {
		p.UsageVerdicts = append(p.UsageVerdicts, PredicateUsage{MemberID: u.MemberID, SessionID: u.SessionID, Verdict: u.Verdict})
	}
	for _, b := range c.bindings[r.RunID] {
		p.Bindings = append(p.Bindings, PredicateBind{Source: b.Source, Records: b.Records, SHA256: b.SHA256})
	}
	raw, err := json.Marshal(p)
	if err != nil {
		return nil, fmt.Errorf("attest: run %s: encode predicate: %w", r.RunID, err)
	}
	pred := &structpb.Struct{}
	if err := protojson.Unmarshal(raw, pred); err != nil {
		return nil, fmt.Errorf("attest: run %s: predicate: %w", r.RunID, err)
	}
	st := &intoto.Statement{Type: intoto.StatementTypeUri, PredicateType: PredicateType, Predicate: pred,
		Subject: []*intoto.ResourceDescriptor{{Name: SubjectRunPrefix + r.RunID, Digest: map[string]string{"sha256": r.TerminalHash}}}}
	arts := append([]evidence.ArtifactLink(nil), r.Artifacts...)
	sort.Slice(arts, func(i, j int) bool { return arts[i].Name < arts[j].Name })
	for _, a := range arts {
		st.Subject = append(st.Subject, &intoto.ResourceDescriptor{Name: r.RunID + "/" + a.Name, Digest: map[string]string{"sha256": a.Digest},
			MediaType: a.MediaType})
	}
	if err := st.Validate(); err != nil {
		return nil, fmt.Errorf("attest: run %s: statement: %w", r.RunID, err)
	}
	return st, nil
}

// lineage returns the runs runID continues, first run first, ending with runID.
func (c *catalog) lineage(runID string) []string {
	out := []string{runID}
	seen := map[string]bool{runID: true}
	for r := c.byID[runID]; r.CorrectsRunID != "" && !seen[r.CorrectsRunID]; r = c.byID[r.CorrectsRunID] {
		seen[r.CorrectsRunID] = true
		out = append([]string{r.CorrectsRunID}, out...)
	}
	return out
}

// signStatement signs st as a DSSE envelope and returns it as one line of JSON.
func (s *Signer) signStatement(ctx context.Context, st *intoto.Statement) ([]byte, error) {
	payload, err := protojson.Marshal(st)
	if err != nil {
		return nil, fmt.Errorf("attest: encode statement: %w", err)
	}
	return s.sign(ctx, PayloadTypeInToto, payload)
}

func (s *Signer) sign(ctx context.Context, payloadType string, payload []byte) ([]byte, error) {
	env, err := s.env.SignPayload(ctx, payloadType, payload)
	if err != nil {
		return nil, fmt.Errorf("attest: sign: %w", err)
	}
	line, err := json.Marshal(env)
	if err != nil {
		return nil, fmt.Errorf("attest: encode envelope: %w", err)
	}
	return line, nil
}

// open verifies a DSSE envelope's signature with v and returns its payload.
// Errors name what failed: not an envelope, no valid signature by v's key, an
// unexpected payload type.
func (v *Verifier) open(ctx context.Context, data []byte, payloadType string) ([]byte, error) {
	var env dsse.Envelope
	if err := json.Unmarshal(data, &env); err != nil || env.PayloadType == "" {
		return nil, errors.New("not a DSSE envelope")
	}
	if _, err := v.env.Verify(ctx, &env); err != nil {
		return nil, fmt.Errorf("no valid signature by key %s: %v", v.keyID, err)
	}
	if env.PayloadType != payloadType {
		return nil, fmt.Errorf("payload type %q, not %q", env.PayloadType, payloadType)
	}
	return env.DecodeB64Payload()
}

// SignResult is what Sign did for one run.
type SignResult struct {
	RunID string `json:"run_id"`
	// Outcome is "signed", "already_signed" (an attestation in the directory
	// verifies and matches), or "refused" (Detail says why: the run does not
	// verify, is not finalized, or an attestation for it no longer matches).
	Outcome string `json:"outcome"`
	Detail  string `json:"detail,omitempty"`
	File    string `json:"file,omitempty"` // where its attestation was written
}

// Sign outcomes (SignResult.Outcome).
const (
	SignSigned        = "signed"
	SignAlreadySigned = "already_signed"
	SignRefused       = "refused"
)

// Sign signs every run of results (Store.Verify's output) that is finalized
// or sealed and passes verification, and writes the attestations into dir
// (created when missing) as one new file, "attest-<UTC time>-<n>.intoto.jsonl"
// with one envelope per line, written atomically. A run whose attestation in
// dir verifies and still matches is left as it is; a run that does not pass
// verification, or whose existing attestation no longer matches its evidence
// (the evidence changed since it was signed), is refused, never (re)signed.
// Runs not finalized are skipped. src is the store the results came from.
//
// Sign signs what the store holds: run it where the store is trusted, right
// after the runs were finalized (matrix run --sign-key does so per run), not
// on a store that may have been rewritten since.
//
// Errors: I/O errors writing dir; database errors. Refusals are results.
func Sign(ctx context.Context, src runSource, s *Signer, dir string, results []evidence.RunVerification) ([]SignResult, string, error) {
	c, err := loadCatalog(ctx, src)
	if err != nil {
		return nil, "", err
	}
	existing, err := readDir(ctx, dir, s.Verifier())
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		return nil, "", err
	}
	var out []SignResult
	var lines [][]byte
	for _, res := range results {
		if res.RunID == "" {
			continue
		}
		r, ok := c.byID[res.RunID]
		if !ok || r.TerminalHash == "" {
			continue
		}
		refuse := func(format string, args ...any) {
			out = append(out, SignResult{RunID: r.RunID, Outcome: SignRefused, Detail: fmt.Sprintf(format, args...)})
		}
		if !res.Passed() {
			refuse("the run does not verify (%s: %s)", res.Status, res.Detail)
			continue
		}
		st, err := c.statement(r)
		if err != nil {
			refuse("%v", err)
			continue
		}
		if prior := existing.byRun[r.RunID]; len(prior) > 0 {
			if d := compare(prior, st); d != "" {
				refuse("an attestation for it in %s no longer matches its evidence (%s): the evidence changed since it was signed", dir, d)
			} else {
				out = append(out, SignResult{RunID: r.RunID, Outcome: SignAlreadySigned, File: prior[0].file})
			}
			continue
		}
		line, err := s.signStatement(ctx, st)
		if err != nil {
			return nil, "", err
		}
		lines = append(lines, line)
		out = append(out, SignResult{RunID: r.RunID, Outcome: SignSigned})
	}
	if len(lines) == 0 {
		return out, "", nil
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, "", fmt.Errorf("attest: %w", err)
	}
	name, err := newFileName(dir, "attest")
	if err != nil {
		return nil, "", err
	}
	if err := atomicfile.Write(name, append(bytes.Join(lines, []byte("\n")), '\n'), 0o644); err != nil {
		return nil, "", err
	}
	for i := range out {
		if out[i].Outcome == SignSigned {
			out[i].File = name
		}
	}
	return out, name, nil
}

// SignRun signs one finalized or sealed run of src and writes its attestation
// to dir/<run id>.intoto.jsonl (created when missing; refused when it exists):
// what matrix run --sign-key does right after each finalization.
func SignRun(ctx context.Context, src runSource, s *Signer, dir, runID string) (string, error) {
	c, err := loadCatalogFor(ctx, src, runID)
	if err != nil {
		return "", err
	}
	r, ok := c.byID[runID]
	if !ok {
		return "", fmt.Errorf("attest: run %s: %w", runID, evidence.ErrNoRun)
	}
	st, err := c.statement(r)
	if err != nil {
		return "", err
	}
	line, err := s.signStatement(ctx, st)
	if err != nil {
		return "", err
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", fmt.Errorf("attest: %w", err)
	}
	name := filepath.Join(dir, runID+FileSuffix)
	if _, err := os.Lstat(name); err == nil {
		return "", fmt.Errorf("attest: %s exists: an attestation is never replaced", name)
	}
	if err := atomicfile.Write(name, append(line, '\n'), 0o644); err != nil {
		return "", err
	}
	return name, nil
}

// newFileName returns a file name in dir no file has: prefix-<UTC time>-<n>.intoto.jsonl.
func newFileName(dir, prefix string) (string, error) {
	stamp := time.Now().UTC().Format("20060102t150405")
	for n := 1; n < 10000; n++ {
		name := filepath.Join(dir, fmt.Sprintf("%s-%s-%d%s", prefix, stamp, n, FileSuffix))
		if _, err := os.Lstat(name); errors.Is(err, fs.ErrNotExist) {
			return name, nil
		}
	}
	return "", fmt.Errorf("attest: no free file name in %s", dir)
}

// signed is one attestation read from a file: the statement it signs, or why
// it is not a valid one.
type signed struct {
	file, line string
	runID      string
	statement  *intoto.Statement
	problem    string // "" when the signature and statement are valid
}

// directory is every attestation in a directory, by the run its statement
// names, plus those that name none (unreadable, not signed by the key).
type directory struct {
	byRun   map[string][]signed
	orphans []signed
}

// readDir reads every "*.intoto.jsonl" file of dir and checks each line's
// signature with v. It returns an error wrapping fs.ErrNotExist when dir is
// missing.
func readDir(ctx context.Context, dir string, v *Verifier) (*directory, error) {
	d := &directory{byRun: map[string][]signed{}}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return d, fmt.Errorf("attest: attestations directory: %w", err)
	}
	for _, e := range entries {
		if !strings.HasSuffix(e.Name(), FileSuffix) || !e.Type().IsRegular() {
			continue
		}
		path := filepath.Join(dir, e.Name())
		f, err := os.Open(path)
		if err != nil {
			return d, fmt.Errorf("attest: %w", err)
		}
		sc := bufio.NewScanner(f)
		sc.Buffer(make([]byte, 64<<10), 64<<20)
		n := 0
		for sc.Scan() {
			n++
			raw := bytes.TrimSpace(sc.Bytes())
			if len(raw) == 0 {
				continue
			}
			a := signed{file: path, line: fmt.Sprintf("%s:%d", path, n)}
			if v == nil {
				a.problem = "no public key to check its signature"
				d.orphans = append(d.orphans, a)
				continue
			}
			payload, err := v.open(ctx, raw, PayloadTypeInToto)
			if err != nil {
				a.problem = err.Error()
				d.orphans = append(d.orphans, a)
				continue
			}
			st := &intoto.Statement{}
			if err := protojson.Unmarshal(payload, st); err != nil {
				a.problem = "the signed payload is not an in-toto statement: " + err.Error()
				d.orphans = append(d.orphans, a)
				continue
			}
			if err := st.Validate(); err != nil {
				a.problem = "the signed statement is not valid: " + err.Error()
				d.orphans = append(d.orphans, a)
				continue
			}
			if st.GetType() != intoto.StatementTypeUri || st.GetPredicateType() != PredicateType {
				a.problem = fmt.Sprintf("statement type %q, predicate %q: not an assay run attestation", st.GetType(), st.GetPredicateType())
				d.orphans = append(d.orphans, a)
				continue
			}
			name := st.GetSubject()[0].GetName()
			if !strings.HasPrefix(name, SubjectRunPrefix) {
				a.problem = fmt.Sprintf("its first subject %q names no run", name)
				d.orphans = append(d.orphans, a)
				continue
			}
			a.runID, a.statement = strings.TrimPrefix(name, SubjectRunPrefix), st
			d.byRun[a.runID] = append(d.byRun[a.runID], a)
		}
		err = sc.Err()
		f.Close()
		if err != nil {
			return d, fmt.Errorf("attest: read %s: %w", path, err)
		}
	}
	return d, nil
}

// compare returns "" when every attestation of prior signs a statement equal
// to want, else what differs.
func compare(prior []signed, want *intoto.Statement) string {
	for _, a := range prior {
		if d := diffStatements(a.statement, want); d != "" {
			return fmt.Sprintf("%s: %s", a.line, d)
		}
	}
	return ""
}

// diffStatements names the parts of got that differ from want: subjects (the
// terminal hash, artifacts) and each top-level predicate field.
func diffStatements(got, want *intoto.Statement) string {
	var diffs []string
	gs, ws := got.GetSubject(), want.GetSubject()
	if len(gs) == 0 || len(ws) == 0 || gs[0].GetDigest()["sha256"] != ws[0].GetDigest()["sha256"] {
		g := ""
		if len(gs) > 0 {
			g = gs[0].GetDigest()["sha256"]
		}
		diffs = append(diffs, fmt.Sprintf("terminal hash: signed %s, now %s", g, ws[0].GetDigest()["sha256"]))
	}
	subj := func(xs []*intoto.ResourceDescriptor) map[string]string {
		m := map[string]string{}
		for _, x := range xs[min(1, len(xs)):] {
			m[x.GetName()] = x.GetDigest()["sha256"] + " " + x.GetMediaType()
		}
		return m
	}
	for _, n := range changedKeys(subj(gs), subj(ws)) {
		diffs = append(diffs, "artifact "+n)
	}
	for _, k := range changedKeys(fields(got.GetPredicate()), fields(want.GetPredicate())) {
		diffs = append(diffs, "predicate "+k)
	}
	return strings.Join(diffs, ", ")
}

// changedKeys returns, sorted, the keys whose values differ between a and b
// or that only one of them has.
func changedKeys(a, b map[string]string) []string {
	var keys []string
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			keys = append(keys, k)
		}
	}
	for k := range b {
		if _, ok := a[k]; !ok {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	return keys
}

// fields returns each top-level field of a predicate as canonical JSON (RFC 8785).
func fields(p *structpb.Struct) map[string]string {
	out := map[string]string{}
	for k, v := range p.GetFields() {
		raw, err := protojson.Marshal(v)
		if err != nil {
			out[k] = "unencodable"
			continue
		}
		canon, err := jcs.Transform(raw)
		if err != nil {
			out[k] = string(raw)
			continue
		}
		out[k] = string(canon)
	}
	return out
}

// Check checks the attestations in dir against the store: every run of
// results that is finalized or sealed needs one whose signature verifies
// with v and whose statement equals the one the store yields now. It returns
// the results with Attestation set on each such run — verified, missing
// (nobody signed it: it may have been added by someone without the key),
// invalid (a signature or statement that does not hold; Status becomes
// tampered) or differs (validly signed, but the evidence changed since:
// Status becomes tampered) — plus, when all is set (results cover every run),
// a tampered entry for each signed run the store lacks (unknown_run) and for
// each line of an attestation file that is not a valid attestation by v's
// key.
//
// Errors: dir missing or unreadable (wrapping fs.ErrNotExist when missing);
// database errors.
func Check(ctx context.Context, src runSource, v *Verifier, dir string, results []evidence.RunVerification, all bool) ([]evidence.RunVerification, error) {
	d, err := readDir(ctx, dir, v)
	if err != nil {
		return nil, err
	}
	c, err := loadCatalog(ctx, src)
	if err != nil {
		return nil, err
	}
	out := make([]evidence.RunVerification, 0, len(results))
	seen := map[string]bool{}
	for _, res := range results {
		if res.RunID == "" {
			out = append(out, res)
			continue
		}
		seen[res.RunID] = true
		r, ok := c.byID[res.RunID]
		prior := d.byRun[res.RunID]
		switch {
		case !ok && len(prior) > 0:
			res.Attestation = evidence.AttestationDiffers
			res.Detail = fmt.Sprintf("signed in %s, but the run's row is gone from the store; %s", prior[0].line, res.Detail)
		case !ok || r.TerminalHash == "":
			if len(prior) > 0 {
				res.Attestation, res.Status = evidence.AttestationDiffers, evidence.VerifyTampered
				res.Detail = fmt.Sprintf("signed as finalized in %s, but the run is %s now: a status change on a finalized run; %s", prior[0].line, r.Status, res.Detail)
			}
		case len(prior) == 0:
			res.Attestation = evidence.AttestationMissing
			res.Detail = fmt.Sprintf("no attestation in %s signs this run (a run added by someone without the key has none); %s", dir, res.Detail)
		default:
			want, err := c.statement(r)
			if err != nil {
				res.Attestation = evidence.AttestationDiffers
				res.Detail = fmt.Sprintf("%v; %s", err, res.Detail)
			} else if diff := compare(prior, want); diff != "" {
				res.Attestation, res.Status = evidence.AttestationDiffers, evidence.VerifyTampered
				res.Detail = fmt.Sprintf("validly signed, but the evidence changed since: %s; %s", diff, res.Detail)
			} else {
				res.Attestation = evidence.AttestationVerified
			}
		}
		out = append(out, res)
	}
	if all {
		var ids []string
		for id := range d.byRun {
			if !seen[id] {
				ids = append(ids, id)
			}
		}
		sort.Strings(ids)
		for _, id := range ids {
			out = append(out, evidence.RunVerification{RunID: id, Status: evidence.VerifyTampered, Attestation: evidence.AttestationUnknownRun,
				Detail: fmt.Sprintf("%s signs run %s, which the store lacks: the run was deleted", d.byRun[id][0].line, id)})
		}
		for _, a := range d.orphans {
			out = append(out, evidence.RunVerification{Status: evidence.VerifyTampered, Table: "attestations", Row: a.line,
				Attestation: evidence.AttestationInvalid, Detail: fmt.Sprintf("%s is not a valid attestation: %s", a.line, a.problem)})
		}
	}
	return out, nil
}

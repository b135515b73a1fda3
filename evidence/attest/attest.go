package attest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"

	intoto "github.com/in-toto/attestation/go/v1"
	"github.com/secure-systems-lab/go-securesystemslib/dsse"
	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/types/known/structpb"

	"github.com/assay-audit/assay/evidence"
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

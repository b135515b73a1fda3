package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"time"

	"github.com/gowebpki/jcs"
)

// ZeroHash is the prev_hash of a run's first event: 32 zero bytes, hex.
const ZeroHash = "0000000000000000000000000000000000000000000000000000000000000000"

// EventTimeLayout formats event times inside the hashed event object: RFC 3339
// in UTC with exactly nine fractional digits. Stored times have microsecond
// precision (DuckDB TIMESTAMP), so the last three digits are always zero.
const EventTimeLayout = "2006-01-02T15:04:05.000000000Z"

// canonical returns the RFC 8785 (JCS) form of v's JSON encoding.
func canonical(v any) ([]byte, error) {
	raw, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return jcs.Transform(raw)
}

// canonicalObject validates that raw is one JSON object and returns its
// RFC 8785 canonical form. The reason string names what is wrong.
func canonicalObject(raw []byte) ([]byte, string) {
	trimmed := bytes.TrimSpace(raw)
	if len(trimmed) == 0 {
		return nil, "missing"
	}
	if !json.Valid(trimmed) {
		return nil, "malformed JSON"
	}
	if trimmed[0] != '{' {
		return nil, "not a JSON object"
	}
	out, err := jcs.Transform(trimmed)
	if err != nil {
		return nil, "cannot canonicalize (RFC 8785): " + err.Error()
	}
	return out, ""
}

func sha256Hex(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// isDigest reports whether s is a lowercase SHA-256 hex digest (64 chars).
func isDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// eventObject is the hashed form of an event (docs/evidence-schema.md).
type eventObject struct {
	RunID     string          `json:"run_id"`
	Seq       int64           `json:"seq"`
	Parent    int64           `json:"parent"`
	Type      string          `json:"type"`
	MemberID  string          `json:"member_id"`
	SessionID string          `json:"session_id"`
	Time      string          `json:"time"`
	Payload   json.RawMessage `json:"payload"`
}

// EventHash computes an event's chain hash:
//
//	hex(SHA-256(prev_hash_raw_32_bytes || JCS(object)))
//
// where object = {"run_id","seq","parent","type","member_id","session_id",
// "time" (EventTimeLayout, UTC),"payload"} and JCS is RFC 8785. prevHash is
// the previous event's hash (ZeroHash for seq 1). RunID, Seq, Parent, Type,
// MemberID, SessionID, Time and Payload of ev are hashed; its PrevHash and
// Hash fields are ignored. It fails when prevHash is not 64 hex chars or the
// payload is not valid JSON.
func EventHash(prevHash string, ev StoredEvent) (string, error) {
	prev, err := hex.DecodeString(prevHash)
	if err != nil || len(prev) != sha256.Size {
		return "", fmt.Errorf("evidence: previous hash %q is not SHA-256 hex", prevHash)
	}
	obj, err := canonical(eventObject{
		RunID:     ev.RunID,
		Seq:       ev.Seq,
		Parent:    ev.Parent,
		Type:      ev.Type,
		MemberID:  ev.MemberID,
		SessionID: ev.SessionID,
		Time:      ev.Time.UTC().Format(EventTimeLayout),
		Payload:   ev.Payload,
	})
	if err != nil {
		return "", fmt.Errorf("evidence: canonicalize event %s/%d: %w", ev.RunID, ev.Seq, err)
	}
	h := sha256.New()
	h.Write(prev)
	h.Write(obj)
	return hex.EncodeToString(h.Sum(nil)), nil
}

// envelopeObject is the hashed form of an Envelope.
type envelopeObject struct {
	Tenant                 string   `json:"tenant"`
	ManifestDigest         string   `json:"manifest_digest"`
	Mode                   string   `json:"mode"`
	PolicyDigest           string   `json:"policy_digest"`
	DatasetDigest          string   `json:"dataset_digest"`
	EnvironmentFingerprint string   `json:"environment_fingerprint"`
	EntropySources         []string `json:"entropy_sources"`
	ReplayTolerance        string   `json:"replay_tolerance"`
	Provider               string   `json:"provider"`
	BaseURL                string   `json:"base_url"`
	Model                  string   `json:"model"`
	Formation              string   `json:"formation"`
	TaskProfile            string   `json:"task_profile"`
	Language               string   `json:"language"`
}

// Digest returns the envelope digest: SHA-256 hex of the RFC 8785 form of
// {"tenant","manifest_digest","mode","policy_digest","dataset_digest",
// "environment_fingerprint","entropy_sources","replay_tolerance","provider",
// "base_url","model","formation","task_profile","language"} (a nil
// EntropySources hashes as []). Replay compares envelopes by this digest.
func (e Envelope) Digest() (string, error) {
	sources := e.EntropySources
	if sources == nil {
		sources = []string{}
	}
	b, err := canonical(envelopeObject{
		Tenant: e.Tenant, ManifestDigest: e.ManifestDigest, Mode: e.Mode,
		PolicyDigest: e.PolicyDigest, DatasetDigest: e.DatasetDigest,
		EnvironmentFingerprint: e.EnvironmentFingerprint, EntropySources: sources,
		ReplayTolerance: e.ReplayTolerance, Provider: e.Provider, BaseURL: e.BaseURL,
		Model: e.Model, Formation: e.Formation, TaskProfile: e.TaskProfile, Language: e.Language,
	})
	if err != nil {
		return "", fmt.Errorf("evidence: canonicalize envelope: %w", err)
	}
	return sha256Hex(b), nil
}

// TerminalRecord is everything a finalized run's terminal hash covers.
type TerminalRecord struct {
	RunID          string
	CorrectsRunID  string
	EnvelopeDigest string
	LastEventHash  string // ZeroHash when the run has no events
	EventCount     int64
	Artifacts      []ArtifactLink
	Checks         []Check
	Usage          []UsageRow
	UsageVerdicts  []UsageVerdict
	Verdict        Verdict
}

type terminalArtifact struct {
	Name      string `json:"name"`
	Digest    string `json:"digest"`
	MediaType string `json:"media_type"`
}

type terminalCheck struct {
	Name     string          `json:"name"`
	Required bool            `json:"required"`
	Status   string          `json:"status"`
	Detail   string          `json:"detail"`
	Evidence json.RawMessage `json:"evidence"`
}

type terminalUsage struct {
	MemberID         string `json:"member_id"`
	SessionID        string `json:"session_id"`
	Source           string `json:"source"`
	State            string `json:"state"`
	Requests         int    `json:"requests"`
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	TotalTokens      *int64 `json:"total_tokens"`
	CachedTokens     *int64 `json:"cached_tokens"`
	ReasoningTokens  *int64 `json:"reasoning_tokens"`
}

type terminalUsageVerdict struct {
	MemberID  string           `json:"member_id"`
	SessionID string           `json:"session_id"`
	Verdict   string           `json:"verdict"`
	Deltas    map[string]int64 `json:"deltas"`
	Detail    string           `json:"detail"`
}

type terminalVerdict struct {
	Verdict string   `json:"verdict"`
	Reasons []string `json:"reasons"`
}

type terminalObject struct {
	RunID          string             `json:"run_id"`
	CorrectsRunID  string             `json:"corrects_run_id"`
	EnvelopeDigest string             `json:"envelope_digest"`
	LastEventHash  string             `json:"last_event_hash"`
	EventCount     int64              `json:"event_count"`
	Artifacts      []string           `json:"artifacts"`
	ArtifactLinks  []terminalArtifact `json:"artifact_links"`
	Checks         []terminalCheck    `json:"checks"`
	Usage          []json.RawMessage  `json:"usage"`
	UsageVerdicts  []json.RawMessage  `json:"usage_verdicts"`
	Verdict        terminalVerdict    `json:"verdict"`
}

// TerminalHash computes a finalized run's terminal hash: hex SHA-256 of the
// RFC 8785 form of
//
//	{"run_id", "corrects_run_id", "envelope_digest", "last_event_hash",
//	 "event_count", "artifacts": sorted distinct digests,
//	 "artifact_links": [{name, digest, media_type}] sorted by name,
//	 "checks": [{name, required, status, detail, evidence}] sorted by name,
//	 "usage": usage rows sorted by their canonical JSON,
//	 "usage_verdicts": usage verdicts sorted by their canonical JSON,
//	 "verdict": {verdict, reasons}}
//
// Absent evidence and unknown token counts hash as null. The input slices are
// not modified.
func TerminalHash(r TerminalRecord) (string, error) {
	obj := terminalObject{
		RunID: r.RunID, CorrectsRunID: r.CorrectsRunID, EnvelopeDigest: r.EnvelopeDigest,
		LastEventHash: r.LastEventHash, EventCount: r.EventCount,
		Artifacts: []string{}, ArtifactLinks: []terminalArtifact{}, Checks: []terminalCheck{},
		Usage: []json.RawMessage{}, UsageVerdicts: []json.RawMessage{},
		Verdict: terminalVerdict{Verdict: r.Verdict.Verdict, Reasons: r.Verdict.Reasons},
	}
	if obj.Verdict.Reasons == nil {
		obj.Verdict.Reasons = []string{}
	}
	seen := map[string]bool{}
	for _, a := range r.Artifacts {
		obj.ArtifactLinks = append(obj.ArtifactLinks, terminalArtifact{Name: a.Name, Digest: a.Digest, MediaType: a.MediaType})
		if !seen[a.Digest] {
			seen[a.Digest] = true
			obj.Artifacts = append(obj.Artifacts, a.Digest)
		}
	}
	sort.Strings(obj.Artifacts)
	sort.Slice(obj.ArtifactLinks, func(i, j int) bool { return obj.ArtifactLinks[i].Name < obj.ArtifactLinks[j].Name })
	for _, c := range r.Checks {
		ev := c.Evidence
		if len(bytes.TrimSpace(ev)) == 0 {
			ev = json.RawMessage("null")
		}
		obj.Checks = append(obj.Checks, terminalCheck{Name: c.Name, Required: c.Required, Status: c.Status, Detail: c.Detail, Evidence: ev})
	}
	sort.Slice(obj.Checks, func(i, j int) bool { return obj.Checks[i].Name < obj.Checks[j].Name })
	for _, u := range r.Usage {
		b, err := canonical(terminalUsage{
			MemberID: u.MemberID, SessionID: u.SessionID, Source: u.Source, State: u.State, Requests: u.Requests,
			PromptTokens: u.PromptTokens, CompletionTokens: u.CompletionTokens, TotalTokens: u.TotalTokens,
			CachedTokens: u.CachedTokens, ReasoningTokens: u.ReasoningTokens,
		})
		if err != nil {
			return "", fmt.Errorf("evidence: canonicalize usage row: %w", err)
		}
		obj.Usage = append(obj.Usage, b)
	}
	sortRaw(obj.Usage)
	for _, v := range r.UsageVerdicts {
		d := v.Deltas
		if d == nil {
			d = map[string]int64{}
		}
		b, err := canonical(terminalUsageVerdict{MemberID: v.MemberID, SessionID: v.SessionID, Verdict: v.Verdict, Deltas: d, Detail: v.Detail})
		if err != nil {
			return "", fmt.Errorf("evidence: canonicalize usage verdict: %w", err)
		}
		obj.UsageVerdicts = append(obj.UsageVerdicts, b)
	}
	sortRaw(obj.UsageVerdicts)
	b, err := canonical(obj)
	if err != nil {
		return "", fmt.Errorf("evidence: canonicalize terminal record of run %s: %w", r.RunID, err)
	}
	return sha256Hex(b), nil
}

func sortRaw(xs []json.RawMessage) {
	sort.Slice(xs, func(i, j int) bool { return bytes.Compare(xs[i], xs[j]) < 0 })
}

// utcMicro normalizes a time to what a DuckDB TIMESTAMP column stores.
func utcMicro(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

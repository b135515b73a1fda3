package evidence

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"sort"
	"strconv"
	"time"
	"unicode/utf8"

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
	if isCanonicalObject(raw) {
		return raw, ""
	}
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

// EventHash computes an event's chain hash:
//
//	hex(SHA-256(prev_hash_raw_32_bytes || JCS(object)))
//
// where object = {"run_id","seq","parent","type","member_id","session_id",
// "time" (EventTimeLayout, UTC),"payload"} and JCS is RFC 8785. prevHash is
// the previous event's hash (ZeroHash for seq 1). RunID, Seq, Parent, Type,
// MemberID, SessionID, Time and Payload of ev are hashed; its PrevHash and
// Hash fields are ignored. It fails when prevHash is not 64 hex chars, the
// payload is not valid JSON, a string is not UTF-8, or seq/parent lie outside
// the range JCS represents exactly (0..2^53).
func EventHash(prevHash string, ev StoredEvent) (string, error) {
	prev, err := hex.DecodeString(prevHash)
	if err != nil || len(prev) != sha256.Size {
		return "", fmt.Errorf("evidence: previous hash %q is not SHA-256 hex", prevHash)
	}
	payload, err := jcs.Transform(ev.Payload)
	if err != nil {
		return "", fmt.Errorf("evidence: canonicalize event %s/%d payload: %w", ev.RunID, ev.Seq, err)
	}
	var h hasher
	sum, err := h.eventHash((*[32]byte)(prev), ev, payload)
	if err != nil {
		return "", err
	}
	return hex.EncodeToString(sum[:]), nil
}

// maxJCSInt is the largest integer RFC 8785 (ES Number) serializes exactly.
const maxJCSInt = 1 << 53

// hasher computes event hashes with a reused buffer. It builds JCS(object)
// directly: the members in RFC 8785 key order (member_id, parent, payload,
// run_id, seq, session_id, time, type), strings escaped as RFC 8785 section
// 3.2.2.2 prescribes, integers in decimal, and the payload's bytes as given,
// which must already be its RFC 8785 form. TestEventHashMatchesJCS checks it
// against jcs.Transform of the encoded object. Not safe for concurrent use.
type hasher struct {
	buf []byte
}

// eventHash returns SHA-256(prev || JCS(object)) for ev with the canonical
// payload bytes canonicalPayload.
func (h *hasher) eventHash(prev *[32]byte, ev StoredEvent, canonicalPayload []byte) ([32]byte, error) {
	if ev.Seq < 0 || ev.Seq > maxJCSInt || ev.Parent < 0 || ev.Parent > maxJCSInt {
		return [32]byte{}, fmt.Errorf("evidence: event %s/%d: seq or parent outside 0..2^53", ev.RunID, ev.Seq)
	}
	b := h.buf[:0]
	b = append(b, prev[:]...)
	var ok bool
	b = append(b, `{"member_id":`...)
	if b, ok = appendJCSString(b, ev.MemberID); !ok {
		return [32]byte{}, fmt.Errorf("evidence: event %s/%d: member_id is not UTF-8", ev.RunID, ev.Seq)
	}
	b = append(b, `,"parent":`...)
	b = strconv.AppendInt(b, ev.Parent, 10)
	b = append(b, `,"payload":`...)
	b = append(b, canonicalPayload...)
	b = append(b, `,"run_id":`...)
	if b, ok = appendJCSString(b, ev.RunID); !ok {
		return [32]byte{}, fmt.Errorf("evidence: event %s/%d: run_id is not UTF-8", ev.RunID, ev.Seq)
	}
	b = append(b, `,"seq":`...)
	b = strconv.AppendInt(b, ev.Seq, 10)
	b = append(b, `,"session_id":`...)
	if b, ok = appendJCSString(b, ev.SessionID); !ok {
		return [32]byte{}, fmt.Errorf("evidence: event %s/%d: session_id is not UTF-8", ev.RunID, ev.Seq)
	}
	b = append(b, `,"time":"`...)
	b = ev.Time.UTC().AppendFormat(b, EventTimeLayout)
	b = append(b, `","type":`...)
	if b, ok = appendJCSString(b, ev.Type); !ok {
		return [32]byte{}, fmt.Errorf("evidence: event %s/%d: type is not UTF-8", ev.RunID, ev.Seq)
	}
	b = append(b, '}')
	h.buf = b
	return sha256.Sum256(b), nil
}

// appendJCSString appends s as an RFC 8785 JSON string (section 3.2.2.2:
// the ECMAScript JSON.stringify escaping: \b \t \n \f \r \" \\ as two-char
// escapes, other code points below U+0020 as \u00xx with lowercase hex,
// everything else literally). It reports false when s is not valid UTF-8.
func appendJCSString(b []byte, s string) ([]byte, bool) {
	const hexDigits = "0123456789abcdef"
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c >= utf8.RuneSelf {
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				return b, false
			}
			i += size
			continue
		}
		if c >= 0x20 && c != '"' && c != '\\' {
			i++
			continue
		}
		b = append(b, s[start:i]...)
		switch c {
		case '"':
			b = append(b, '\\', '"')
		case '\\':
			b = append(b, '\\', '\\')
		case '\b':
			b = append(b, '\\', 'b')
		case '\t':
			b = append(b, '\\', 't')
		case '\n':
			b = append(b, '\\', 'n')
		case '\f':
			b = append(b, '\\', 'f')
		case '\r':
			b = append(b, '\\', 'r')
		default:
			b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		i++
		start = i
	}
	b = append(b, s[start:]...)
	return append(b, '"'), true
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
	// Case and InvocationID (schema v6) are omitted when empty, so the
	// digest of every envelope recorded before them is unchanged.
	Case         string `json:"case,omitempty"`
	InvocationID string `json:"invocation_id,omitempty"`
	// Task and Repeat (schema v7) are omitted when empty or 0, likewise.
	Task   string `json:"task,omitempty"`
	Repeat int    `json:"repeat,omitempty"`
}

// Digest returns the envelope digest: SHA-256 hex of the RFC 8785 form of
// {"tenant","manifest_digest","mode","policy_digest","dataset_digest",
// "environment_fingerprint","entropy_sources","replay_tolerance","provider",
// "base_url","model","formation","task_profile","language"} (a nil
// EntropySources hashes as []), plus "case" and "invocation_id" only when
// they are not empty (schema v6), and "task" and "repeat" only when not
// empty and not 0 (schema v7), so an envelope without them has the digest
// it had before. Replay compares envelopes by this digest.
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
		Case: e.Case, InvocationID: e.InvocationID, Task: e.Task, Repeat: e.Repeat,
	})
	if err != nil {
		return "", fmt.Errorf("evidence: canonicalize envelope: %w", err)
	}
	return sha256Hex(b), nil
}

// Admission is one entry of the store-wide admissions chain (table
// admissions, schema v3): OpenRun appends one per run, in the transaction
// that creates the run, chained to the previous admission by AdmissionHash.
// Deleting a run then breaks the chain (or leaves a gap in the ordinals)
// unless every later admission is rewritten.
type Admission struct {
	Ordinal        int64     // 1, 2, ... in admission order; equals runs.ordinal
	RunID          string    // the admitted run
	EnvelopeDigest string    // runs.envelope_digest, SHA-256 hex
	CorrectsRunID  string    // runs.corrects_run_id; "" when none
	AdmittedAt     time.Time // runs.created_at: UTC, microsecond precision
	// Backfilled marks an admission chained by the v2 -> v3 migration for a
	// run that existed before it, rather than by OpenRun. Such runs have no
	// check_recorded or run_finalized events.
	Backfilled bool
	PrevHash   string // previous admission's Hash; ZeroHash for the first
	Hash       string // AdmissionHash(PrevHash, this)
}

// AdmissionHash computes an admission's chain hash, in the form of EventHash:
//
//	hex(SHA-256(prev_hash_raw_32_bytes || JCS(object)))
//
// where object = {"ordinal", "run_id", "envelope_digest", "corrects_run_id",
// "admitted_at" (EventTimeLayout, UTC), "backfilled"} and JCS is RFC 8785.
// prevHash is the previous admission's hash (ZeroHash for the first). The
// PrevHash and Hash fields of a are ignored. It fails when prevHash is not 64
// hex chars, a string is not UTF-8, or the ordinal lies outside 1..2^53.
func AdmissionHash(prevHash string, a Admission) (string, error) {
	prev, err := hex.DecodeString(prevHash)
	if err != nil || len(prev) != sha256.Size {
		return "", fmt.Errorf("evidence: previous admission hash %q is not SHA-256 hex", prevHash)
	}
	if a.Ordinal < 1 || a.Ordinal > maxJCSInt {
		return "", fmt.Errorf("evidence: admission of run %s: ordinal %d outside 1..2^53", a.RunID, a.Ordinal)
	}
	for _, s := range []string{a.RunID, a.EnvelopeDigest, a.CorrectsRunID} {
		if !utf8.ValidString(s) {
			return "", fmt.Errorf("evidence: admission %d: a field is not UTF-8", a.Ordinal)
		}
	}
	b, err := canonical(struct {
		Ordinal        int64  `json:"ordinal"`
		RunID          string `json:"run_id"`
		EnvelopeDigest string `json:"envelope_digest"`
		CorrectsRunID  string `json:"corrects_run_id"`
		AdmittedAt     string `json:"admitted_at"`
		Backfilled     bool   `json:"backfilled"`
	}{a.Ordinal, a.RunID, a.EnvelopeDigest, a.CorrectsRunID, a.AdmittedAt.UTC().Format(EventTimeLayout), a.Backfilled})
	if err != nil {
		return "", fmt.Errorf("evidence: canonicalize admission %d: %w", a.Ordinal, err)
	}
	return sha256Hex(append(prev, b...)), nil
}

// Terminal hash definitions (runs.terminal_version).
const (
	// TerminalV1 is the definition of schema v1 (no per-call usage, no
	// checkpoints); runs finalized under v1 keep it after migration.
	TerminalV1 = 1
	// TerminalV2 adds usage_calls, checkpoints and the usage verdicts'
	// duplicated/multiple/sources; runs finalized under v2 keep it.
	TerminalV2 = 2
	// TerminalV3 (schema v3) adds "admission_hash", binding the run to its
	// place in the store-wide admissions chain. A run finalized under it also
	// carries its checks and verdict in its own hash chain (check_recorded
	// events and a last run_finalized event), which Verify compares with the
	// checks and verdicts tables.
	TerminalV3 = 3
)

// TerminalRecord is everything a finalized run's terminal hash covers.
type TerminalRecord struct {
	Version        int // TerminalV1, TerminalV2, TerminalV3 or TerminalV5 (0 is read as TerminalV3)
	RunID          string
	CorrectsRunID  string
	EnvelopeDigest string
	LastEventHash  string // ZeroHash when the run has no events
	EventCount     int64
	Artifacts      []ArtifactLink
	Checks         []Check
	Usage          []UsageRow
	UsageCalls     []UsageCall // observations (v2)
	UsageVerdicts  []UsageVerdict
	Checkpoints    []CheckpointInfo // v2
	Verdict        Verdict
	AdmissionHash  string // v3: the run's admissions-chain hash (Admission.Hash)

	// Version 5 hashes the fields above from RunID to EventCount, Verdict
	// and AdmissionHash, and these instead of Artifacts to Checkpoints:
	Status           string    // StatusFinalized, or StatusInterrupted for a sealed run
	FinalizedAt      time.Time // runs.finalized_at (= verdicts.decided_at = the run_finalized event's time)
	RequestedVerdict string    // verdicts.requested_verdict
	WriterID         *int64    // runs.writer_id; nil when NULL
	WriterHash       string    // that writer session's writers.hash; "" when there is none
	// Tables holds the run's rows of each table terminalTables lists, each
	// as the canonical JSON object of its columns, in key order.
	Tables map[string][]json.RawMessage
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

type terminalUsageVerdictV2 struct {
	terminalUsageVerdict
	Duplicated bool                   `json:"duplicated"`
	Multiple   int64                  `json:"multiple"`
	Sources    map[string]SourceUsage `json:"sources"`
}

type terminalUsageCall struct {
	Source        string `json:"source"`
	CallID        string `json:"call_id"`
	SessionID     string `json:"session_id"`
	MemberID      string `json:"member_id"`
	RequestSHA256 string `json:"request_sha256"`
	Messages      *int64 `json:"messages"`
	State         string `json:"state"`
	Prompt        *int64 `json:"prompt_tokens"`
	Completion    *int64 `json:"completion_tokens"`
	Total         *int64 `json:"total_tokens"`
	Cached        *int64 `json:"cached_tokens"`
	Reasoning     *int64 `json:"reasoning_tokens"`
}

type terminalCheckpoint struct {
	Seq       int64  `json:"seq"`
	EventHash string `json:"event_hash"`
	Hash      string `json:"hash"`
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
	// v2 and later (omitted for v1, whose object has no such keys).
	UsageCalls  []terminalUsageCall  `json:"usage_calls,omitempty"`
	Checkpoints []terminalCheckpoint `json:"checkpoints,omitempty"`
	Version     int                  `json:"terminal_version,omitempty"`
	// v3 and later.
	AdmissionHash string `json:"admission_hash,omitempty"`
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
// plus, for TerminalV2 and later, "terminal_version", "usage_calls",
// "checkpoints" and each usage verdict's duplicated/multiple/sources, and for
// TerminalV3 "admission_hash". TerminalV5 hashes instead
//
//	{"terminal_version": 5, "run_id", "corrects_run_id", "envelope_digest",
//	 "admission_hash", "last_event_hash", "event_count", "status",
//	 "finalized_at", "writer_id", "writer_hash",
//	 "verdict": {verdict, requested_verdict, reasons},
//	 "tables": {table: [row objects with every column]}}
//
// (docs/evidence-schema.md gives each definition). Absent evidence and unknown token counts hash as null. The
// input slices are not modified. It fails for an unknown version, or a v3
// record whose AdmissionHash is not SHA-256 hex.
func TerminalHash(r TerminalRecord) (string, error) {
	version := r.Version
	if version == 0 {
		version = TerminalV3
	}
	if version == TerminalV5 {
		return terminalHashV5(r)
	}
	if version != TerminalV1 && version != TerminalV2 && version != TerminalV3 {
		return "", fmt.Errorf("evidence: terminal hash version %d of run %s is unknown", r.Version, r.RunID)
	}
	if version >= TerminalV3 && !isDigest(r.AdmissionHash) {
		return "", fmt.Errorf("evidence: run %s: admission hash %q is not SHA-256 hex", r.RunID, r.AdmissionHash)
	}
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
	v2 := version >= TerminalV2
	for _, v := range r.UsageVerdicts {
		d := v.Deltas
		if d == nil {
			d = map[string]int64{}
		}
		var tv any = terminalUsageVerdict{MemberID: v.MemberID, SessionID: v.SessionID, Verdict: v.Verdict, Deltas: d, Detail: v.Detail}
		if v2 {
			tv = terminalUsageVerdictV2{terminalUsageVerdict: tv.(terminalUsageVerdict), Duplicated: v.Duplicated, Multiple: v.Multiple, Sources: v.Sources}
		}
		b, err := canonical(tv)
		if err != nil {
			return "", fmt.Errorf("evidence: canonicalize usage verdict: %w", err)
		}
		obj.UsageVerdicts = append(obj.UsageVerdicts, b)
	}
	sortRaw(obj.UsageVerdicts)
	if v2 {
		// terminal_version is present in every v2 object, so a v2 run cannot
		// be passed off under the v1 definition.
		obj.Version = version
		if version >= TerminalV3 {
			obj.AdmissionHash = r.AdmissionHash
		}
		obj.UsageCalls = []terminalUsageCall{}
		obj.Checkpoints = []terminalCheckpoint{}
		for _, c := range r.UsageCalls {
			obj.UsageCalls = append(obj.UsageCalls, terminalUsageCall{Source: c.Source, CallID: c.CallID, SessionID: c.SessionID,
				MemberID: c.MemberID, RequestSHA256: c.RequestSHA256, Messages: c.Messages, State: c.State,
				Prompt: c.PromptTokens, Completion: c.CompletionTokens, Total: c.TotalTokens, Cached: c.CachedTokens, Reasoning: c.ReasoningTokens})
		}
		for _, c := range r.Checkpoints {
			obj.Checkpoints = append(obj.Checkpoints, terminalCheckpoint{Seq: c.Seq, EventHash: c.EventHash, Hash: c.Hash})
		}
		sort.Slice(obj.Checkpoints, func(i, j int) bool { return obj.Checkpoints[i].Seq < obj.Checkpoints[j].Seq })
	}
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

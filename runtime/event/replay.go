package event

import "encoding/json"

// Event types of a replay run (docs/replay.md): a run of kind replay begins with replay_started
// and records its replay verdict in replay_verdict, after the replayed trace and before the store
// closes it with check_recorded and run_finalized.
const (
	TypeReplayStarted = "replay_started"
	TypeReplayVerdict = "replay_verdict"
)

// ReplayStarted is a replay run's first event: which recorded run it replays and the authority it
// was asked to run under, bound before anything is replayed.
type ReplayStarted struct {
	// ReplaysRunID is the recorded run replayed (the run this one is linked to).
	ReplaysRunID string `json:"replays_run_id"`
	// Lineage is the recorded run's lineage, first run first (ReplaysRunID last): a resumed run
	// replays as a chain, one replay run per run of its lineage.
	Lineage []string `json:"lineage"`
	// ChainReplays are the replay runs of the lineage's earlier runs, made by the same replay, in
	// order.
	ChainReplays []string `json:"chain_replays"`
	// Format is the replay format this build honours (e.g. "assay-replay/1").
	Format string `json:"format"`
	// Tolerance is the tolerance policy compared under, "name@version".
	Tolerance string `json:"tolerance"`
	// Tenant, Mode, PolicyDigest, DatasetDigest and ManifestDigest are the authority the replay was
	// asked to run under (the recorded values where none was given); RecordedEnvelopeDigest is the
	// replayed run's envelope digest.
	Tenant                 string `json:"tenant"`
	Mode                   string `json:"mode"`
	PolicyDigest           string `json:"policy_digest"`
	DatasetDigest          string `json:"dataset_digest"`
	ManifestDigest         string `json:"manifest_digest"`
	RecordedEnvelopeDigest string `json:"recorded_envelope_digest"`
	// Checks is true when the acceptance checks are re-run on the replay (--checks).
	Checks bool `json:"checks"`
}

// ReplayVerdict is a replay run's verdict: exact, within_tolerance, mismatch, refused or
// non_certifiable.
type ReplayVerdict struct {
	Verdict string `json:"verdict"`
	// Reason says why a replay was refused, non_certifiable or a mismatch, in one line.
	Reason string `json:"reason,omitempty"`
	// FirstDivergence is the first place the replay differs from the recording; null unless the
	// verdict is mismatch.
	FirstDivergence *ReplayDivergence `json:"first_divergence"`
	// Differences are the differences the tolerance policy allowed, one per field (within_tolerance).
	Differences []ReplayDifference `json:"differences,omitempty"`
	// NotCompared names what the tolerance policy leaves out of the comparison, and why.
	NotCompared []string `json:"not_compared,omitempty"`
	// Requests is how many provider requests the cassette answered; ToolCalls how many tool calls
	// were served from the recording.
	Requests  int `json:"requests"`
	ToolCalls int `json:"tool_calls"`
	// Checks compares, with --checks, each recorded acceptance check with the one re-derived on
	// the replay.
	Checks []ReplayCheck `json:"checks,omitempty"`
}

// ReplayDivergence is where a replay first differs from the recording.
type ReplayDivergence struct {
	// RunID is the recorded run of the lineage the divergence is in.
	RunID string `json:"run_id"`
	// Member is the member ("" for a run-level event); Session its session id.
	Member  string `json:"member"`
	Session string `json:"session,omitempty"`
	// Seq is the provider request sequence number, for a divergence in a provider exchange.
	Seq *int `json:"request_seq,omitempty"`
	// Event is the event type, EventSeq the recorded event's sequence number (0 when the replay has
	// an event the recording does not).
	Event    string `json:"event,omitempty"`
	EventSeq int64  `json:"event_seq,omitempty"`
	// CallID is the tool call, for a divergence in a tool call.
	CallID string `json:"call_id,omitempty"`
	// Check is the acceptance check, for a divergence in the re-derived verdict.
	Check string `json:"check,omitempty"`
	// Pointer is the RFC 6901 JSON Pointer of the first differing field, in the request body, the
	// tool call's arguments, the event or the check.
	Pointer string `json:"pointer"`
	// Recorded and Replayed are the two values (null where absent).
	Recorded json.RawMessage `json:"recorded"`
	Replayed json.RawMessage `json:"replayed"`
	Detail   string          `json:"detail"`
}

// ReplayDifference is a field the tolerance policy allowed to differ, with how much it did.
type ReplayDifference struct {
	// Field is the policy's name for it (e.g. "event time", "latency_ms").
	Field string `json:"field"`
	// Event, EventSeq and Pointer are the first place it differed: the recorded event (a
	// checkpoint state's for a checkpoint) and the JSON Pointer in the compared document; Count is
	// how many places did.
	Event    string `json:"event"`
	EventSeq int64  `json:"event_seq"`
	Pointer  string `json:"pointer"`
	Count    int    `json:"count"`
	// MinDelta and MaxDelta are the smallest and largest difference, replayed minus recorded, in
	// Unit ("seconds", "milliseconds"); both 0 with Unit "" for a value that is not a number or a
	// time.
	MinDelta float64 `json:"min_delta"`
	MaxDelta float64 `json:"max_delta"`
	Unit     string  `json:"unit,omitempty"`
}

// ReplayCheck is one acceptance check as recorded and as re-derived on the replay; a side that has
// no such check has an empty status.
type ReplayCheck struct {
	Name              string `json:"name"`
	RecordedRequired  bool   `json:"recorded_required"`
	RecordedStatus    string `json:"recorded_status"`
	RecordedDetail    string `json:"recorded_detail,omitempty"`
	RederivedRequired bool   `json:"rederived_required"`
	RederivedStatus   string `json:"rederived_status"`
	RederivedDetail   string `json:"rederived_detail,omitempty"`
}

func (ReplayStarted) EventType() string { return TypeReplayStarted }
func (ReplayVerdict) EventType() string { return TypeReplayVerdict }

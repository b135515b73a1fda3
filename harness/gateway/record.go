package gateway

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"
)

// Usage states of a Record and of a SessionUsage.
const (
	// UsageReported: the response carried a usage object (for a session:
	// every request's response did).
	UsageReported = "reported"
	// UsagePartial: some, not all, requests of a session reported usage.
	UsagePartial = "partial"
	// UsageUnknown: no usage was reported (or there were no requests).
	// Unknown is never counted as zero.
	UsageUnknown = "unknown"
	// UsageSuspectZero (a Record's state only): the response reported
	// prompt_tokens 0 for a request that had messages (or whose message count
	// is unknown). A chat request with messages cannot cost zero prompt
	// tokens, so the counts are kept as reported but not summed as usage.
	UsageSuspectZero = "suspect_zero"
)

// Record is one proxied request as the gateway saw it. Token counts are nil
// (NULL in the database) when the response did not report them, never 0.
type Record struct {
	// ID is the row id in the usage database, assigned when the request
	// arrives: a session's records in ID order are in arrival order, and ids
	// keep increasing across gateway restarts on the same database.
	ID        int64
	SessionID string // value of the session header; "" when absent
	Method    string // HTTP method
	Path      string // URL path without the query string (which may carry credentials)
	Model     string // "model" field of the JSON request body (the model asked for); "" if none
	// AnsweredModel is the "model" the response named (a JSON body's top-level model, a stream's
	// first chunk model): the model that answered. "" when the response named none, was not a 2xx
	// JSON or event-stream body, or was not relayed completely.
	AnsweredModel string
	Stream        bool // the request body asked for streaming ("stream": true)
	// Status is the HTTP status the client received: the upstream's status, or
	// the gateway's own when RelayError says the upstream was not consulted or
	// failed (502 when the upstream could not be reached, 400 for an unreadable
	// request body, 501 for a refused protocol upgrade). 0 if nothing was sent.
	Status         int
	LatencyMS      float64 // from request received to response fully relayed, milliseconds (volatile)
	RequestSHA256  string  // hex SHA-256 (64 chars) of the exact request body bytes forwarded
	ResponseSHA256 string  // hex SHA-256 (64 chars) of the exact response body bytes relayed to the client
	// ResponseDecodedSHA256 is the hex SHA-256 of the response body with its Content-Encoding
	// (gzip, deflate) undone: the bytes a client that decompresses saw; equal to ResponseSHA256
	// for an unencoded body, "" when the body was not relayed completely or could not be decoded.
	ResponseDecodedSHA256 string
	// EchoedSession is the session header the response carried back ("" when none): a provider
	// that echoes it states which session it attributed the request to. Several values are joined
	// with ", ".
	EchoedSession string
	RequestBytes  int64 // size of the forwarded request body, bytes
	ResponseBytes int64 // size of the relayed response body, bytes (as sent: compressed if the upstream compressed)
	// UsageState is UsageReported when a complete 2xx response carried a usage
	// object with at least one token count, UsageSuspectZero when that object
	// said prompt_tokens 0 for a request with messages, else UsageUnknown.
	UsageState string
	// Token counts from the usage object (OpenAI chat completions usage:
	// prompt_tokens, completion_tokens, total_tokens,
	// prompt_tokens_details.cached_tokens,
	// completion_tokens_details.reasoning_tokens); nil = unknown.
	PromptTokens, CompletionTokens, TotalTokens, CachedTokens, ReasoningTokens *int64
	// RelayError is RelayOK ("") for a completely relayed response, else one
	// of the Relay* classifications.
	RelayError string
	StartedAt  time.Time // when the request arrived, UTC (volatile)
}

// SessionUsage is the gateway's summed usage for one session id.
type SessionUsage struct {
	SessionID string `json:"session_id"`
	Requests  int    `json:"requests"` // proxied requests recorded for the session
	// NoUsageRequests counts the session's requests the API defines no token usage for
	// (UsageUndefined: a GET /v1/models, a health probe); they take no part in State or the sums.
	NoUsageRequests int `json:"no_usage_requests"`
	// State is UsageReported (every other request reported usage), UsagePartial
	// (some did) or UsageUnknown (none did, or no requests).
	State string `json:"state"`
	// Sums over the session's requests; nil (JSON null) unless State is
	// UsageReported and every request reported that count.
	PromptTokens     *int64 `json:"prompt_tokens"`
	CompletionTokens *int64 `json:"completion_tokens"`
	TotalTokens      *int64 `json:"total_tokens"`
	CachedTokens     *int64 `json:"cached_tokens"`
	ReasoningTokens  *int64 `json:"reasoning_tokens"`
}

// Records returns the records whose session id equals sessionID, or, with
// prefix=true, starts with it (so a run id prefix selects every member of a
// run), ordered by ID. It first waits, honouring ctx, until every request of a
// matching session that is in flight at the call has been recorded, so a
// caller that has received its response always sees it.
//
// Errors: the ctx error (wrapped) if ctx ends while waiting; an error wrapping
// ErrRecordLost (a *RecordLostError per session) if a matching request was
// relayed but could not be recorded; ErrClosed after Close; database errors.
// Safe for concurrent use.
func (g *Gateway) Records(ctx context.Context, sessionID string, prefix bool) ([]Record, error) {
	if err := g.inflight.wait(ctx, sessionID, prefix); err != nil {
		return nil, err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil, fmt.Errorf("%w: records of session %q", ErrClosed, sessionID)
	}
	return g.asOf(g.store.records(ctx, sessionID, prefix))
}

// asOf leaves out the records that arrived after Config.Until, when it is set.
func (g *Gateway) asOf(recs []Record, err error) ([]Record, error) {
	if err != nil || g.until.IsZero() {
		return recs, err
	}
	return slices.DeleteFunc(recs, func(r Record) bool { return r.StartedAt.After(g.until) }), nil
}

// Mark returns the id of the last request that has arrived (0 before any): every request arriving
// later gets a greater id. RecordsIn(ctx, mark, later mark) is what arrived in between.
func (g *Gateway) Mark() int64 { return g.store.lastID.Load() }

// RecordsIn returns the records of every session with after < ID <= upTo (two Marks), ordered by
// ID, after waiting, like Records, for every request in flight at the call to be recorded.
// Errors: those of Records; a request of any session relayed but not recorded is ErrRecordLost.
func (g *Gateway) RecordsIn(ctx context.Context, after, upTo int64) ([]Record, error) {
	if err := g.inflight.wait(ctx, "", true); err != nil {
		return nil, err
	}
	g.mu.RLock()
	defer g.mu.RUnlock()
	if g.closed {
		return nil, fmt.Errorf("%w: records %d..%d", ErrClosed, after+1, upTo)
	}
	return g.asOf(g.store.recordsIn(ctx, after, upTo))
}

// Usage returns the summed usage of exactly sessionID, after waiting for its
// in-flight recordings like Records does. Errors are those of Records.
func (g *Gateway) Usage(ctx context.Context, sessionID string) (SessionUsage, error) {
	recs, err := g.Records(ctx, sessionID, false)
	if err != nil {
		return SessionUsage{}, err
	}
	return SumUsage(sessionID, recs), nil
}

// SumUsage sums the usage of recs (assumed to belong to sessionID). A count is
// summed only when every record reported it; otherwise it stays nil, because
// an unknown addend makes the sum unknown.
//
// A request UsageUndefined says carries no usage by the API's definition is counted in
// NoUsageRequests and left out of the state and the sums.
func SumUsage(sessionID string, recs []Record) SessionUsage {
	u := SessionUsage{SessionID: sessionID, Requests: len(recs), State: UsageUnknown}
	recs = slices.DeleteFunc(slices.Clone(recs), UsageUndefined)
	u.NoUsageRequests = u.Requests - len(recs)
	reported := 0
	for _, r := range recs {
		if r.UsageState == UsageReported {
			reported++
		}
	}
	switch {
	case reported == 0:
		return u
	case reported < len(recs):
		u.State = UsagePartial
		return u
	}
	u.State = UsageReported
	sum := func(get func(Record) *int64) *int64 {
		var total int64
		for _, r := range recs {
			v := get(r)
			if v == nil {
				return nil
			}
			total += *v
		}
		return &total
	}
	u.PromptTokens = sum(func(r Record) *int64 { return r.PromptTokens })
	u.CompletionTokens = sum(func(r Record) *int64 { return r.CompletionTokens })
	u.TotalTokens = sum(func(r Record) *int64 { return r.TotalTokens })
	u.CachedTokens = sum(func(r Record) *int64 { return r.CachedTokens })
	u.ReasoningTokens = sum(func(r Record) *int64 { return r.ReasoningTokens })
	return u
}

// adminError is the JSON body of a failed admin request.
type adminError struct {
	Error string `json:"error"`
}

const (
	usagePathPrefix = "/admin/usage/run/"
	healthPath      = "/admin/health"
)

// AdminSchemaVersion is the schema_version of the admin endpoints' JSON
// objects (docs/json.md): it changes when a key is renamed or removed or a
// value changes meaning.
const AdminSchemaVersion = 1

// adminUsage is the body of GET /admin/usage/run/{session_id}: SessionUsage
// under schema_version.
type adminUsage struct {
	SchemaVersion int `json:"schema_version"`
	SessionUsage
}

// Health is the body of GET /admin/health.
type Health struct {
	SchemaVersion int `json:"schema_version"`
	// Status is "ok", or "records_lost" (served with HTTP 500) when a relayed
	// request could not be recorded: the database no longer holds everything
	// that went over the wire.
	Status string `json:"status"`
	// Upstream is the upstream's scheme://host (no user info, path or query).
	Upstream       string   `json:"upstream"`
	SessionHeaders []string `json:"session_headers"` // canonical header names, in the order read
	InFlight       int      `json:"in_flight"`       // requests arrived and not yet recorded
	LastRecordID   int64    `json:"last_record_id"`  // id of the last request that arrived (0 before any)
	LostRecords    int      `json:"lost_records"`    // requests relayed but not recorded
}

// Health returns the gateway's state as GET /admin/health serves it.
func (g *Gateway) Health() Health {
	h := Health{SchemaVersion: AdminSchemaVersion, Status: "ok", Upstream: g.upstream,
		SessionHeaders: g.SessionHeaders(), LastRecordID: g.Mark()}
	h.InFlight, h.LostRecords = g.inflight.counts()
	if h.LostRecords > 0 {
		h.Status = "records_lost"
	}
	return h
}

// serveAdmin answers GET /admin/usage/run/{session_id} with SessionUsage JSON
// under schema_version (session_id is the rest of the path, percent-decoded,
// and may contain "/") and GET /admin/health with Health. Other /admin/ paths
// are 404; other methods are 405.
func (g *Gateway) serveAdmin(w http.ResponseWriter, r *http.Request) {
	session, ok := strings.CutPrefix(r.URL.Path, usagePathPrefix)
	health := r.URL.Path == healthPath
	if !health && (!ok || session == "") {
		writeJSON(w, http.StatusNotFound, adminError{Error: "not found: the gateway serves GET " + usagePathPrefix + "{session_id} and GET " + healthPath})
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeJSON(w, http.StatusMethodNotAllowed, adminError{Error: "method not allowed"})
		return
	}
	if health {
		h := g.Health()
		status := http.StatusOK
		if h.LostRecords > 0 {
			status = http.StatusInternalServerError
		}
		writeJSON(w, status, h)
		return
	}
	u, err := g.Usage(r.Context(), session)
	switch {
	case err == nil:
		writeJSON(w, http.StatusOK, adminUsage{SchemaVersion: AdminSchemaVersion, SessionUsage: u})
	case errors.Is(err, ErrRecordLost):
		writeJSON(w, http.StatusInternalServerError, adminError{Error: err.Error()})
	case errors.Is(err, ErrClosed):
		writeJSON(w, http.StatusServiceUnavailable, adminError{Error: err.Error()})
	case r.Context().Err() != nil:
		// The client gave up while we waited; nobody reads this.
		writeJSON(w, http.StatusServiceUnavailable, adminError{Error: err.Error()})
	default:
		writeJSON(w, http.StatusInternalServerError, adminError{Error: err.Error()})
	}
}

func writeJSON[T adminUsage | Health | adminError](w http.ResponseWriter, status int, v T) {
	body, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(append(body, '\n')) // a failed write means the client left
}

// UsageUndefined reports whether r is a request the OpenAI-compatible API defines no token usage
// for, GET or HEAD (GET /v1/models, a health probe), that reported none: an honest client that
// lists models is neither an unknown in its session's sum nor unattributed usage. A GET that did
// report usage is summed like any other request.
func UsageUndefined(r Record) bool {
	return (r.Method == http.MethodGet || r.Method == http.MethodHead) && r.UsageState != UsageReported
}

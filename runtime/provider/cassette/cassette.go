// Package cassette serves a run's recorded provider exchanges back to the runtime, for replay
// (docs/replay.md). It is an http.RoundTripper under the runtime's own OpenAI-compatible client
// (provider.Client): the replayed request is encoded, sent, retried and its answer parsed by the
// same code path as the recorded one, and the cassette stands where the network was. Nothing
// leaves the process and no model is asked.
//
// For each member session the cassette holds the session's recorded exchanges in request order.
// Each replayed request's body is hashed (SHA-256 of the bytes sent, as the runtime recorded
// request_sha256) and must equal the recorded hash of the next exchange of its session; the
// cassette then answers with the recorded status and raw response bytes. A request that differs,
// or that the recording does not have, is a divergence: the cassette records where the two
// requests first differ (a JSON Pointer, with both values) and answers HTTP 409, so no recorded
// answer is ever given to a question that was not asked. After the replay, recorded exchanges that
// were never asked are divergences too.
package cassette

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/assay-audit/assay/internal/jsondiff"
	"github.com/assay-audit/assay/runtime/provider"
)

// Exchange is one recorded provider exchange of a member session.
type Exchange struct {
	// Session is the member session id the request was sent under; Member its member id.
	Session, Member string
	// Seq is the session's request sequence number (0-based).
	Seq int
	// RequestSHA256 is the recorded SHA-256 hex of the request body as sent; "" when no request was
	// sent (the client refused it before sending): the cassette then expects none.
	RequestSHA256 string
	// Request is the recorded request body, used to name where a replayed request differs; nil when
	// it was not recorded.
	Request []byte
	// Status is the recorded HTTP status of the last attempt; MediaType the response's media type
	// (text/event-stream for a stream).
	Status    int
	MediaType string
	// Response is the recorded raw response body of the last attempt; nil when no response was
	// received (a transport failure, whose text is Error).
	Response []byte
	Error    string
	// Attempts is how many HTTP requests the client sent for the exchange (1, or more after 429 or
	// 5xx answers). Only the last attempt's answer is recorded: the cassette answers the earlier
	// attempts with HTTP 503 (a body saying it was not recorded), so the client's retry path runs
	// as often as it did.
	Attempts int
	// Order places the exchange in the recording (e.g. its event's sequence number); divergences
	// are ordered by it.
	Order int64
}

// Divergence is a replayed request that is not the recorded one.
type Divergence struct {
	Session, Member string
	// Seq is the request sequence number: of the recorded exchange it should have been, or, for a
	// request the recording does not have, the next number after the session's recorded ones.
	Seq int
	// Order is the recorded exchange's Order (for an extra request: the session's last recorded
	// exchange's, or math.MaxInt64 when it has none).
	Order int64
	// Pointer is the RFC 6901 JSON Pointer, in the request body, of the first field that differs
	// ("" when the whole request is missing on one side or is not JSON).
	Pointer string
	// Recorded and Replayed are the values there as JSON (nil where absent).
	Recorded, Replayed json.RawMessage
	// Detail says what happened, in one sentence.
	Detail string
}

// Cassette serves recorded exchanges. It is safe for concurrent use: members' sessions are
// independent, and one session's requests are sequential.
type Cassette struct {
	header string

	mu       sync.Mutex
	sessions map[string]*session
	divs     []Divergence
	asked    int
}

type session struct {
	exchanges []Exchange
	next      int // index of the next exchange to serve
	attempt   int // attempts already answered for exchanges[next]
	extra     int // requests beyond the recording
}

// New returns a cassette over the exchanges (any order; each session's are served by Seq). header
// is the session header the client sends (provider.DefaultSessionHeader when "").
func New(header string, exchanges []Exchange) *Cassette {
	if header == "" {
		header = provider.DefaultSessionHeader
	}
	c := &Cassette{header: header, sessions: map[string]*session{}}
	for _, x := range exchanges {
		if x.RequestSHA256 == "" {
			continue // nothing went on the wire; the client refuses it again before sending
		}
		s := c.sessions[x.Session]
		if s == nil {
			s = &session{}
			c.sessions[x.Session] = s
		}
		s.exchanges = append(s.exchanges, x)
	}
	for _, s := range c.sessions {
		slices.SortStableFunc(s.exchanges, func(a, b Exchange) int { return a.Seq - b.Seq })
	}
	return c
}

// BaseURL is the base URL a client of the cassette is given; nothing is ever sent there.
const BaseURL = "http://cassette.invalid/v1"

// Client returns the runtime's OpenAI-compatible client with the cassette as its transport, retrying
// without waiting (a recorded retry's delay is not reproduced).
func (c *Cassette) Client() (*provider.Client, error) {
	return provider.NewClient(provider.ClientConfig{BaseURL: BaseURL, SessionHeader: c.header,
		HTTPClient: &http.Client{Transport: c}, RetryBaseDelay: time.Nanosecond})
}

// RoundTrip answers one request from the recording (see the package comment). It returns an error
// only to reproduce a recorded transport failure.
func (c *Cassette) RoundTrip(r *http.Request) (*http.Response, error) {
	var body []byte
	if r.Body != nil {
		b, err := io.ReadAll(r.Body)
		r.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("cassette: read request: %w", err)
		}
		body = b
	}
	sum := sha256.Sum256(body)
	hash := hex.EncodeToString(sum[:])
	sid := r.Header.Get(c.header)

	c.mu.Lock()
	defer c.mu.Unlock()
	c.asked++
	s := c.sessions[sid]
	if s == nil || s.next >= len(s.exchanges) {
		seq, order, member := 0, int64(math.MaxInt64), ""
		if s == nil {
			s = &session{}
			c.sessions[sid] = s
		}
		if n := len(s.exchanges); n > 0 {
			last := s.exchanges[n-1]
			seq, order, member = last.Seq+1+s.extra, last.Order, last.Member
		}
		s.extra++
		c.divs = append(c.divs, Divergence{Session: sid, Member: member, Seq: seq, Order: order, Replayed: rawBody(body),
			Detail: fmt.Sprintf("the replay sent request %d of session %s, which the recording does not have", seq, sid)})
		return answer(r, http.StatusConflict, "application/json", conflict("the recording has no such request")), nil
	}
	x := s.exchanges[s.next]
	if hash != x.RequestSHA256 {
		s.next++
		s.attempt = 0
		d := Divergence{Session: sid, Member: x.Member, Seq: x.Seq, Order: x.Order}
		if x.Request == nil {
			d.Detail = fmt.Sprintf("request %d of %s hashes to %s, the recorded request_sha256 is %s (the recorded request bytes are not available to compare)",
				x.Seq, sid, hash, x.RequestSHA256)
		} else if diff, found := jsondiff.FirstBytes(x.Request, body); found {
			d.Pointer, d.Recorded, d.Replayed = diff.Pointer, jsondiff.Raw(diff.A, diff.InA), jsondiff.Raw(diff.B, diff.InB)
			d.Detail = fmt.Sprintf("request %d of %s differs from the recorded one at %s", x.Seq, sid, labelPointer(diff.Pointer))
		} else {
			d.Detail = fmt.Sprintf("request %d of %s is the recorded JSON in other bytes (SHA-256 %s, recorded %s)", x.Seq, sid, hash, x.RequestSHA256)
		}
		c.divs = append(c.divs, d)
		return answer(r, http.StatusConflict, "application/json", conflict(d.Detail)), nil
	}
	s.attempt++
	if s.attempt < x.Attempts {
		return answer(r, http.StatusServiceUnavailable, "application/json",
			conflict(fmt.Sprintf("attempt %d of %d of request %d was not recorded", s.attempt, x.Attempts, x.Seq))), nil
	}
	s.next++
	s.attempt = 0
	if x.Response == nil {
		return nil, fmt.Errorf("cassette: the recorded request %d of %s received no response: %s", x.Seq, sid, x.Error)
	}
	return answer(r, x.Status, x.MediaType, x.Response), nil
}

// Asked returns how many HTTP requests the cassette answered.
func (c *Cassette) Asked() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.asked
}

// Divergences returns the divergences so far, ordered by Order then session and sequence, with,
// once the replay has ended, every recorded exchange that was never asked.
func (c *Cassette) Divergences() []Divergence {
	c.mu.Lock()
	defer c.mu.Unlock()
	out := slices.Clone(c.divs)
	for sid, s := range c.sessions {
		for _, x := range s.exchanges[s.next:] {
			out = append(out, Divergence{Session: sid, Member: x.Member, Seq: x.Seq, Order: x.Order, Recorded: rawBody(x.Request),
				Detail: fmt.Sprintf("the recorded request %d of %s was not sent by the replay", x.Seq, sid)})
		}
	}
	slices.SortStableFunc(out, func(a, b Divergence) int {
		if a.Order != b.Order {
			if a.Order < b.Order {
				return -1
			}
			return 1
		}
		if n := strings.Compare(a.Session, b.Session); n != 0 {
			return n
		}
		return a.Seq - b.Seq
	})
	return out
}

func labelPointer(p string) string {
	if p == "" {
		return "the document root"
	}
	return p
}

// rawBody is a request body as a JSON value for a report: the JSON itself, or the text as a string.
func rawBody(b []byte) json.RawMessage {
	if b == nil {
		return nil
	}
	if json.Valid(b) {
		return json.RawMessage(b)
	}
	return jsondiff.Raw(string(b), true)
}

func conflict(msg string) []byte {
	b, _ := json.Marshal(map[string]any{"error": map[string]string{"type": "cassette", "message": "cassette: " + msg}})
	return b
}

func answer(r *http.Request, status int, mediaType string, body []byte) *http.Response {
	h := http.Header{}
	if mediaType != "" {
		h.Set("Content-Type", mediaType)
	}
	return &http.Response{Status: fmt.Sprintf("%d %s", status, http.StatusText(status)), StatusCode: status,
		Proto: "HTTP/1.1", ProtoMajor: 1, ProtoMinor: 1, Header: h, Body: io.NopCloser(bytes.NewReader(body)),
		ContentLength: int64(len(body)), Request: r}
}

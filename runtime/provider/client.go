package provider

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"time"

	"golang.org/x/net/http/httpguts"
)

// Defaults and limits of Client.
const (
	// DefaultSessionHeader is the header that carries Request.SessionID.
	DefaultSessionHeader = "X-Session-Id"
	// DefaultTimeout bounds one HTTP attempt.
	DefaultTimeout = 60 * time.Second
	// DefaultMaxRetries is the number of retries after a 429 or 5xx answer.
	DefaultMaxRetries = 2
	// DefaultRetryBaseDelay is the wait before the first retry; each further
	// retry waits twice as long as the one before.
	DefaultRetryBaseDelay = 200 * time.Millisecond
	// MaxResponseBytes bounds a response body (64 MiB); a longer body is
	// ErrMalformedResponse.
	MaxResponseBytes = 64 << 20
	// MaxErrorBodyBytes bounds HTTPError.Body.
	MaxErrorBodyBytes = 4096
)

// ClientConfig configures a Client.
type ClientConfig struct {
	// BaseURL is the API root, e.g. "http://127.0.0.1:8080/v1"; chat
	// completions are at BaseURL+"/chat/completions". Scheme http or https.
	BaseURL string
	// APIKey is sent as "Authorization: Bearer ..." when non-empty. It is
	// never logged, never put in errors, and redacted from response bytes.
	APIKey string
	// SessionHeader names the header carrying Request.SessionID; default
	// DefaultSessionHeader.
	SessionHeader string
	// Timeout bounds each HTTP attempt, including reading the body; default
	// DefaultTimeout. Negative is an error.
	Timeout time.Duration
	// HTTPClient sends the requests; default a new http.Client with the
	// default transport. Its own Timeout, if any, also applies.
	HTTPClient *http.Client
	// MaxRetries bounds the retries of the model request after a 429 or 5xx
	// answer (default DefaultMaxRetries when 0; negative means none). Nothing
	// else is ever retried: not transport errors, not broken streams, not
	// malformed bodies.
	MaxRetries int
	// RetryBaseDelay is the wait before the first retry, doubled for each
	// further one; default DefaultRetryBaseDelay. Negative is an error.
	RetryBaseDelay time.Duration
}

// Client is an OpenAI-compatible chat-completions client. It is safe for
// concurrent use; it holds no per-request state.
type Client struct {
	base          string
	endpoint      string
	apiKey        string
	sessionHeader string
	timeout       time.Duration
	http          *http.Client
	maxRetries    int
	retryBase     time.Duration
}

var (
	_ Provider         = (*Client)(nil)
	_ CapacityReporter = (*Client)(nil)
)

// NewClient validates cfg and returns a Client. It returns ErrInvalidRequest
// (wrapped) for a base URL that is not absolute http(s), an invalid session
// header name, or a negative timeout or retry delay.
func NewClient(cfg ClientConfig) (*Client, error) {
	u, err := url.Parse(cfg.BaseURL)
	if err != nil {
		// The parse error quotes the URL, which may hold credentials.
		return nil, fmt.Errorf("%w: base URL does not parse", ErrInvalidRequest)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("%w: base URL %q must be an absolute http or https URL", ErrInvalidRequest, u.Redacted())
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%w: base URL %q must not carry a query or fragment", ErrInvalidRequest, u.Redacted())
	}
	c := &Client{
		base:          strings.TrimSuffix(cfg.BaseURL, "/"),
		endpoint:      strings.TrimSuffix(cfg.BaseURL, "/") + "/chat/completions",
		apiKey:        cfg.APIKey,
		sessionHeader: cfg.SessionHeader,
		timeout:       cfg.Timeout,
		http:          cfg.HTTPClient,
		maxRetries:    cfg.MaxRetries,
		retryBase:     cfg.RetryBaseDelay,
	}
	if c.sessionHeader == "" {
		c.sessionHeader = DefaultSessionHeader
	}
	if !httpguts.ValidHeaderFieldName(c.sessionHeader) { // an RFC 9110 token
		return nil, fmt.Errorf("%w: session header %q is not a valid header name", ErrInvalidRequest, c.sessionHeader)
	}
	switch {
	case c.timeout < 0:
		return nil, fmt.Errorf("%w: timeout %v is negative", ErrInvalidRequest, c.timeout)
	case c.timeout == 0:
		c.timeout = DefaultTimeout
	}
	switch {
	case c.retryBase < 0:
		return nil, fmt.Errorf("%w: retry base delay %v is negative", ErrInvalidRequest, c.retryBase)
	case c.retryBase == 0:
		c.retryBase = DefaultRetryBaseDelay
	}
	switch {
	case c.maxRetries < 0:
		c.maxRetries = 0
	case c.maxRetries == 0:
		c.maxRetries = DefaultMaxRetries
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	return c, nil
}

// Complete sends req to {BaseURL}/chat/completions and returns the assistant
// reply. A 429 or 5xx answer is retried up to MaxRetries times with
// exponential backoff; nothing else is retried.
//
// Errors (all wrapped, naming the session id and Seq):
//   - ErrInvalidRequest before anything is sent, with a nil Response;
//   - *HTTPError for a non-2xx answer after retries, with the Response of the
//     last attempt (Status, Raw);
//   - ErrBrokenStream or ErrMalformedResponse for an unusable 2xx answer,
//     with the Response holding the bytes received;
//   - the transport or context error when no answer was received, with a
//     Response holding RequestBody when the request was built.
func (c *Client) Complete(ctx context.Context, req Request) (*Response, error) {
	switch {
	case req.SessionID == "":
		return nil, fmt.Errorf("%w: session id is empty (seq %d)", ErrInvalidRequest, req.Seq)
	case req.Model == "":
		return nil, fmt.Errorf("%w: session %q seq %d: model is empty", ErrInvalidRequest, req.SessionID, req.Seq)
	case len(req.Messages) == 0:
		return nil, fmt.Errorf("%w: session %q seq %d: no messages", ErrInvalidRequest, req.SessionID, req.Seq)
	}
	body, err := encodeRequest(req)
	if err != nil {
		return nil, fmt.Errorf("session %q seq %d: %w", req.SessionID, req.Seq, err)
	}
	sum := sha256.Sum256(body)
	resp := &Response{RequestBody: body, RequestSHA256: hex.EncodeToString(sum[:])}

	delay := c.retryBase
	for attempt := 0; ; attempt++ {
		resp.Attempts = attempt + 1
		retryable, err := c.attempt(ctx, req, resp)
		if err == nil {
			return resp, nil
		}
		if !retryable || attempt >= c.maxRetries {
			return resp, fmt.Errorf("provider: session %q seq %d (attempt %d): %w", req.SessionID, req.Seq, resp.Attempts, err)
		}
		timer := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			timer.Stop()
			return resp, fmt.Errorf("provider: session %q seq %d: waiting to retry after HTTP %d: %w", req.SessionID, req.Seq, resp.Status, ctx.Err())
		case <-timer.C:
		}
		delay *= 2
	}
}

// attempt sends one HTTP request and fills resp from its answer. retryable
// reports a 429 or 5xx status.
func (c *Client) attempt(ctx context.Context, req Request, resp *Response) (retryable bool, err error) {
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()

	// Every attempt starts from a clean answer: nothing of an earlier one
	// may be mistaken for this one's.
	resp.Message, resp.FinishReason, resp.Usage, resp.Model = Message{}, "", nil, ""
	resp.Status, resp.Raw, resp.RawRedacted, resp.Latency = 0, nil, false, 0

	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint, bytes.NewReader(resp.RequestBody))
	if err != nil {
		return false, fmt.Errorf("build request: %w", err)
	}
	hreq.Header.Set("Content-Type", "application/json")
	if req.Stream {
		hreq.Header.Set("Accept", "text/event-stream")
	} else {
		hreq.Header.Set("Accept", "application/json")
	}
	hreq.Header.Set(c.sessionHeader, req.SessionID)
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	}

	start := time.Now()
	hresp, err := c.http.Do(hreq)
	if err != nil {
		return false, fmt.Errorf("send: %w", c.scrub(err))
	}
	defer hresp.Body.Close()
	resp.Status = hresp.StatusCode
	// A server that echoes the session header must echo the session it was sent: a different one
	// means the answer may belong to another member, and it is not used.
	if echo := hresp.Header.Values(c.sessionHeader); len(echo) > 0 && (len(echo) != 1 || echo[0] != req.SessionID) {
		raw, _ := readLimited(hresp.Body)
		resp.Latency = time.Since(start)
		c.setRaw(resp, raw)
		return false, fmt.Errorf("%w: sent session %q, the response echoes %q", ErrSessionMismatch, req.SessionID, strings.Join(echo, ", "))
	}

	if hresp.StatusCode < 200 || hresp.StatusCode > 299 {
		raw, readErr := readLimited(hresp.Body)
		resp.Latency = time.Since(start)
		c.setRaw(resp, raw)
		retryable = hresp.StatusCode == http.StatusTooManyRequests || hresp.StatusCode >= 500
		httpErr := &HTTPError{Status: hresp.StatusCode, Body: c.redactString(truncate(string(raw), MaxErrorBodyBytes))}
		if readErr != nil {
			return retryable, errors.Join(httpErr, fmt.Errorf("read error body: %w", c.scrub(readErr)))
		}
		return retryable, httpErr
	}

	if req.Stream {
		err = c.readStream(hresp.Body, cancel, resp)
		resp.Latency = time.Since(start)
		return false, err
	}
	raw, err := readLimited(hresp.Body)
	resp.Latency = time.Since(start)
	c.setRaw(resp, raw)
	if err != nil {
		return false, fmt.Errorf("read body: %w", c.scrub(err))
	}
	return false, decodeResponse(raw, resp)
}

// ParallelCapacity asks the server for its declared parallel capacity for model: GET
// {BaseURL}/models/{model} and its "max_parallel_requests" field (the name LiteLLM's model info
// uses). It returns an error when the request fails, the status is not 200, the field is absent or
// null, or it is not a positive integer; the capacity is never guessed.
func (c *Client) ParallelCapacity(ctx context.Context, model string) (int, error) {
	if model == "" {
		return 0, fmt.Errorf("%w: model is empty", ErrInvalidRequest)
	}
	ctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	hreq, err := http.NewRequestWithContext(ctx, http.MethodGet, c.base+"/models/"+url.PathEscape(model), nil)
	if err != nil {
		return 0, fmt.Errorf("provider: capacity of %s: %w", model, err)
	}
	hreq.Header.Set("Accept", "application/json")
	if c.apiKey != "" {
		hreq.Header.Set("Authorization", "Bearer "+c.apiKey)
	}
	hresp, err := c.http.Do(hreq)
	if err != nil {
		return 0, fmt.Errorf("provider: capacity of %s: %w", model, c.scrub(err))
	}
	defer hresp.Body.Close()
	raw, err := readLimited(hresp.Body)
	if err != nil {
		return 0, fmt.Errorf("provider: capacity of %s: read body: %w", model, c.scrub(err))
	}
	if hresp.StatusCode != http.StatusOK {
		return 0, fmt.Errorf("provider: capacity of %s: %w", model, &HTTPError{Status: hresp.StatusCode,
			Body: c.redactString(truncate(string(raw), MaxErrorBodyBytes))})
	}
	var info struct {
		MaxParallelRequests json.RawMessage `json:"max_parallel_requests"`
	}
	if err := json.Unmarshal(raw, &info); err != nil {
		return 0, fmt.Errorf("%w: model object for %s: %w", ErrMalformedResponse, model, err)
	}
	v := string(bytes.TrimSpace(info.MaxParallelRequests))
	if v == "" || v == "null" {
		return 0, fmt.Errorf("provider: model %s declares no max_parallel_requests", model)
	}
	// Only a JSON integer literal counts: not a string, not a fraction.
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("%w: model %s declares max_parallel_requests %s, not a positive integer", ErrMalformedResponse, model, v)
	}
	return n, nil
}

// readStream parses the event stream into resp, keeping every byte read in
// resp.Raw. Parsing stops at "data: [DONE]" or at the first unusable event;
// either way the rest of the body is then drained into Raw (see drain) so
// that Raw is what the server sent, not an accident of read boundaries.
func (c *Client) readStream(body io.Reader, cancel context.CancelFunc, resp *Response) error {
	var (
		raw    []byte
		parser sseParser
		state  = newStreamState()
		done   bool
		buf    = make([]byte, 32<<10)
	)
	dispatch := func(data []byte) (bool, error) {
		if string(data) == "[DONE]" {
			done = true
			return true, nil
		}
		return false, state.add(data)
	}
	var err error
	eof := false
	for !done && err == nil {
		n, readErr := body.Read(buf)
		if n > 0 {
			raw = append(raw, buf[:n]...)
			if len(raw) > MaxResponseBytes {
				err = fmt.Errorf("%w: stream exceeds %d bytes", ErrMalformedResponse, MaxResponseBytes)
				break
			}
			if _, err = parser.feed(buf[:n], dispatch); err != nil || done {
				break
			}
		}
		switch {
		case readErr == io.EOF:
			eof = true
			err = fmt.Errorf("%w: stream ended without data: [DONE] after %d bytes and %d chunks", ErrBrokenStream, len(raw), state.chunks)
		case readErr != nil:
			eof = true // the body is unusable; nothing more to drain
			err = fmt.Errorf("%w: reading stream after %d bytes: %w", ErrBrokenStream, len(raw), c.scrub(readErr))
		}
	}
	if !eof && len(raw) <= MaxResponseBytes {
		raw = drain(body, raw, cancel)
	}
	c.setRaw(resp, raw)
	if err != nil {
		return err
	}
	state.finish(resp)
	return nil
}

// DrainGrace bounds how long the client keeps reading a streamed body after
// parsing ended (at "data: [DONE]" or at an unusable event) to keep the
// remaining bytes in Response.Raw. Real servers close the stream right after
// [DONE]; one that does not costs at most this long, and the answer stands.
const DrainGrace = time.Second

// drain appends the rest of body to raw, up to MaxResponseBytes in total,
// for at most DrainGrace; it then cancels the attempt's context, which ends a
// read still blocked. Read errors end the drain silently: parsing is over.
func drain(body io.Reader, raw []byte, cancel context.CancelFunc) []byte {
	timer := time.AfterFunc(DrainGrace, cancel)
	defer timer.Stop()
	rest, _ := io.ReadAll(io.LimitReader(body, int64(MaxResponseBytes-len(raw))))
	return append(raw, rest...)
}

// setRaw stores raw in resp, redacting the API key if it occurs.
func (c *Client) setRaw(resp *Response, raw []byte) {
	if c.apiKey != "" && bytes.Contains(raw, []byte(c.apiKey)) {
		raw = bytes.ReplaceAll(raw, []byte(c.apiKey), []byte("[REDACTED]"))
		resp.RawRedacted = true
	}
	resp.Raw = raw
}

// bearerPattern matches bearer tokens and OpenAI-style secret keys that a
// server may echo in an error body.
var bearerPattern = regexp.MustCompile(`(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+|\bsk-[A-Za-z0-9_-]{8,}`)

// redactString removes the API key, bearer tokens and sk- keys from s.
func (c *Client) redactString(s string) string {
	if c.apiKey != "" {
		s = strings.ReplaceAll(s, c.apiKey, "[REDACTED]")
	}
	return bearerPattern.ReplaceAllStringFunc(s, func(m string) string {
		if strings.HasPrefix(strings.ToLower(m), "bearer") {
			return m[:len("bearer")] + " [REDACTED]"
		}
		return "[REDACTED]"
	})
}

// scrub returns err with the API key redacted from its text when it occurs
// there, keeping err in the chain otherwise.
func (c *Client) scrub(err error) error {
	if c.apiKey == "" || !strings.Contains(err.Error(), c.apiKey) {
		return err
	}
	return &redactedError{msg: c.redactString(err.Error()), err: err}
}

// redactedError shows a redacted message while still unwrapping to the
// original error for errors.Is (context.DeadlineExceeded and the like).
type redactedError struct {
	msg string
	err error
}

func (e *redactedError) Error() string { return e.msg }
func (e *redactedError) Unwrap() error { return e.err }

// readLimited reads at most MaxResponseBytes; a longer body is an error.
func readLimited(r io.Reader) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, MaxResponseBytes+1))
	if err != nil {
		return raw, err
	}
	if len(raw) > MaxResponseBytes {
		return raw[:MaxResponseBytes], fmt.Errorf("%w: body exceeds %d bytes", ErrMalformedResponse, MaxResponseBytes)
	}
	return raw, nil
}

// truncate shortens s to at most n bytes without splitting a UTF-8 sequence.
func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	cut := n
	for cut > 0 && cut < len(s) && s[cut]&0xC0 == 0x80 {
		cut--
	}
	return s[:cut] + "...(truncated)"
}

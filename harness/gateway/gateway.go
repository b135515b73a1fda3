// Package gateway is assay's observing gateway: a reverse proxy between the
// runtime and an OpenAI-compatible provider that records, independently of the
// runtime, what went over the wire.
//
// For every proxied request it writes one row to its own SQLite usage database:
// the session id header, method, path, model, status, latency, SHA-256 and size
// of the request and response bodies, and the usage the response reported. It
// is the "wire" and "gateway" usage sources of assay's usage conservation check
// (the runtime's own client is the "store" source).
//
// The gateway never stores credentials: headers are forwarded to the upstream
// unchanged but no header value except the session header is stored or logged,
// no body is stored (only hashes, sizes and extracted usage), and the query
// string is not stored (some providers take API keys there).
//
// Missing evidence stays missing: a response without a usage object is
// recorded with UsageState "unknown" and NULL token counts, never zeros.
package gateway

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httputil"
	"net/url"
	"runtime"
	"slices"
	"strings"
	"sync"
	"time"
)

// DefaultSessionHeader is the request header that carries a member's session
// id when Config.SessionHeader is empty.
const DefaultSessionHeader = "X-Session-Id"

// DefaultShutdownGrace is how long Close lets in-flight requests finish before
// it cuts their connections, when Config.ShutdownGrace is zero.
const DefaultShutdownGrace = 10 * time.Second

// maxUsageBodyBytes bounds the copy of a response body kept in memory for usage
// extraction (bytes, after decompression). A larger response is still relayed
// and hashed in full, but its usage is recorded as unknown: the gateway never
// guesses a figure it did not read.
const maxUsageBodyBytes = 64 << 20

// maxRecordsBuilding bounds how many responses may be held in memory (each up to
// maxUsageBodyBytes) while their rows are built after the handler returned: past it a handler
// waits before returning, as it did when it built its row itself.
const maxRecordsBuilding = 256

// RelayError values classify a request the gateway could not relay in full.
// They are stored instead of Go error strings, which can carry the upstream URL
// and its query string.
const (
	// RelayOK: the response was relayed completely.
	RelayOK = ""
	// RelayUpstreamUnreachable: the upstream round trip failed (connection
	// refused, DNS, TLS, reset before headers); the client got a 502.
	RelayUpstreamUnreachable = "upstream_unreachable"
	// RelayRequestBodyUnreadable: the client's request body could not be read,
	// so nothing was forwarded; the client got a 400.
	RelayRequestBodyUnreadable = "request_body_unreadable"
	// RelayResponseAborted: the upstream response started but its body could
	// not be read to the end.
	RelayResponseAborted = "response_aborted"
	// RelayClientDisconnected: the client went away (or could not be written
	// to) before the response was fully relayed.
	RelayClientDisconnected = "client_disconnected"
	// RelayGatewayClosed: Close cut the request after the shutdown grace.
	RelayGatewayClosed = "gateway_closed"
	// RelayUpgradeRefused: the request asked for a protocol upgrade
	// (e.g. WebSocket). The gateway cannot observe usage on an upgraded
	// connection, so it refuses with 501 rather than open an unobserved channel.
	RelayUpgradeRefused = "upgrade_refused"
	// RelayStreamUnterminated: a 2xx event stream answering a streaming chat
	// completions (or completions) request ended without its final
	// "data: [DONE]" event (OpenAI API reference, streaming): the upstream cut
	// the stream, so whatever usage it carried so far is not the request's
	// usage and is recorded as unknown.
	RelayStreamUnterminated = "stream_unterminated"
)

// ErrConfig is returned (wrapped) by Start when the Config is unusable.
var ErrConfig = errors.New("gateway: invalid config")

// ErrClosed is returned (wrapped) by Records and Usage after Close.
var ErrClosed = errors.New("gateway: closed")

// Config configures an observing gateway.
type Config struct {
	// Upstream is the provider's base URL, e.g. "http://127.0.0.1:41234".
	// Paths are forwarded unchanged: a request to the gateway's
	// /v1/chat/completions goes to Upstream + "/v1/chat/completions".
	// Required; must be an absolute http or https URL.
	Upstream string
	// SessionHeader is the request header carrying the member session id;
	// default DefaultSessionHeader ("X-Session-Id") when SessionHeaders is
	// empty too.
	SessionHeader string
	// SessionHeaders are further headers that carry the session id (e.g.
	// "X-Inferflux-Session-Id"), read after SessionHeader. A request's session
	// id is the value these headers carry; a request whose session headers
	// carry different values is recorded with no session id (unattributed):
	// the gateway does not pick one.
	SessionHeaders []string
	// Addr is the TCP address to listen on, host:port; port 0 picks a free
	// port. Default "127.0.0.1:0".
	Addr string
	// DBPath is the SQLite usage database file, created (with its parent
	// directory) if missing, e.g. "assay-out/gateway-usage.db". Required.
	DBPath string
	// ShutdownGrace is how long Close waits for in-flight requests to finish
	// before cutting their connections; default DefaultShutdownGrace.
	ShutdownGrace time.Duration
	// ErrorLog receives proxy and server errors (never header values or
	// bodies). Nil discards them.
	ErrorLog *log.Logger
	// Until, when set, makes the gateway a view of its database as it stood
	// then: Records, RecordsIn and the usage endpoint leave out every request
	// that arrived later (a replay re-derives the checks of a run finalized
	// then). Zero serves every record.
	Until time.Time
}

// Gateway is a running observing gateway. Its methods are safe for concurrent
// use.
type Gateway struct {
	url            string
	sessionHeader  string
	sessionHeaders []string // canonical, sessionHeader first, no duplicates
	// recordedHeaders are the response header fields a row reads (recordedHeader).
	recordedHeaders []string
	upstream        string // scheme://host of Config.Upstream (no user info, path or query), for /admin/health
	grace           time.Duration

	srv        *http.Server
	proxy      *httputil.ReverseProxy
	transport  *http.Transport
	baseCtx    context.Context // parent of every request context; cancelled when Close cuts requests
	cancelBase context.CancelFunc
	serveDone  chan struct{}

	store    *store
	inflight *inflight
	handlers sync.WaitGroup // proxied requests from arrival until their row is handed to the writer
	// recordJobs feeds the record workers the responses whose handlers returned; its capacity
	// (maxRecordsBuilding) bounds how many wait. Closed by Close once handlers is done.
	recordJobs chan recordJob
	until      time.Time // Config.Until

	mu     sync.RWMutex // guards closed; held (read) by queries and by handlers joining the handlers group
	closed bool

	closeOnce sync.Once
	closing   chan struct{}
	closeErr  error
}

// Start validates cfg, opens (creating if missing) the usage database at
// cfg.DBPath, listens on 127.0.0.1:0 and serves until Close is called or ctx is
// done (ctx done triggers Close). It returns an error wrapping ErrConfig for an
// unusable config, ErrDatabaseInUse when another gateway holds the database,
// ErrSchemaVersion when the database was written by an
// incompatible gateway version, or the database / listen error.
func Start(ctx context.Context, cfg Config) (*Gateway, error) {
	upstream, err := url.Parse(cfg.Upstream)
	if err != nil {
		return nil, fmt.Errorf("%w: upstream %q: %w", ErrConfig, cfg.Upstream, err)
	}
	if (upstream.Scheme != "http" && upstream.Scheme != "https") || upstream.Host == "" {
		return nil, fmt.Errorf("%w: upstream %q must be an absolute http(s) URL", ErrConfig, cfg.Upstream)
	}
	if cfg.DBPath == "" {
		return nil, fmt.Errorf("%w: DBPath is empty", ErrConfig)
	}
	var headers []string
	for _, h := range append([]string{cfg.SessionHeader}, cfg.SessionHeaders...) {
		h = strings.TrimSpace(h)
		if h == "" {
			continue
		}
		if !validHeaderName(h) {
			return nil, fmt.Errorf("%w: session header %q is not an HTTP header name", ErrConfig, h)
		}
		if h = http.CanonicalHeaderKey(h); !slices.Contains(headers, h) {
			headers = append(headers, h)
		}
	}
	if len(headers) == 0 {
		headers = []string{DefaultSessionHeader}
	}
	for _, h := range headers {
		if credentialHeader(h) {
			return nil, fmt.Errorf("%w: session header %q carries credentials, which the gateway never stores", ErrConfig, h)
		}
	}
	addr := cfg.Addr
	if addr == "" {
		addr = "127.0.0.1:0"
	}
	if _, _, err := net.SplitHostPort(addr); err != nil {
		return nil, fmt.Errorf("%w: listen address %q: %w", ErrConfig, addr, err)
	}
	grace := cfg.ShutdownGrace
	if grace <= 0 {
		grace = DefaultShutdownGrace
	}
	errorLog := cfg.ErrorLog
	if errorLog == nil {
		errorLog = log.New(io.Discard, "", 0)
	}

	st, err := openStore(ctx, cfg.DBPath)
	if err != nil {
		return nil, err
	}
	st.startWriter()
	ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
	if err != nil {
		return nil, errors.Join(fmt.Errorf("gateway: listen on %s: %w", addr, err), st.close())
	}

	transport, ok := http.DefaultTransport.(*http.Transport)
	if !ok {
		transport = &http.Transport{}
	}
	transport = transport.Clone()
	// Forward Accept-Encoding as the client sent it: without this the
	// transport would ask the upstream for gzip on its own and decode it,
	// changing both the request and the relayed bytes.
	transport.DisableCompression = true
	// Keep a connection per concurrent client to the one upstream host: the default of 2 idle
	// connections per host would open (and TIME_WAIT) a new connection for most requests under
	// concurrency (BenchmarkOverheadStreaming at 50 clients: about half the median overhead).
	transport.MaxIdleConns = 0 // no total limit
	transport.MaxIdleConnsPerHost = 256
	baseCtx, cancelBase := context.WithCancel(context.WithoutCancel(ctx))

	g := &Gateway{
		url:             "http://" + ln.Addr().String(),
		sessionHeader:   headers[0],
		sessionHeaders:  headers,
		recordedHeaders: append([]string{"Content-Type", "Content-Encoding"}, headers...),
		upstream:        upstream.Scheme + "://" + upstream.Host,
		grace:           grace,
		transport:       transport,
		baseCtx:         baseCtx,
		cancelBase:      cancelBase,
		serveDone:       make(chan struct{}),
		store:           st,
		inflight:        newInflight(),
		recordJobs:      make(chan recordJob, maxRecordsBuilding),
		until:           cfg.Until,
		closing:         make(chan struct{}),
	}
	g.proxy = &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
		},
		Transport:     transport,
		FlushInterval: -1, // relay SSE chunks as they arrive
		BufferPool:    &copyBuffers{},
		ErrorLog:      errorLog,
		ErrorHandler:  g.upstreamError,
	}
	g.srv = &http.Server{
		Handler:           g,
		ReadHeaderTimeout: 30 * time.Second,
		ErrorLog:          errorLog,
		BaseContext:       func(net.Listener) context.Context { return baseCtx },
	}
	// Long-lived workers rather than a goroutine per request: a worker's stack has already grown
	// to what the JSON parsing needs.
	for range max(2, runtime.GOMAXPROCS(0)) {
		go func() {
			for j := range g.recordJobs {
				g.record(j.x, &j.resp, j.seq)
				g.handlers.Done()
			}
		}()
	}
	go func() {
		defer close(g.serveDone)
		if err := g.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			errorLog.Printf("gateway: serve: %v", err)
		}
	}()
	go func() {
		select {
		case <-ctx.Done():
			_ = g.Close() // the error is kept and returned by the caller's own Close
		case <-g.closing:
		}
	}()
	return g, nil
}

// URL returns the gateway's base URL, "http://127.0.0.1:PORT" without a
// trailing slash. The runtime's OpenAI-compatible client uses URL()+"/v1".
func (g *Gateway) URL() string { return g.url }

// SessionHeader returns the canonical name of the first header the gateway
// reads the session id from.
func (g *Gateway) SessionHeader() string { return g.sessionHeader }

// SessionHeaders returns the canonical names of every header the gateway reads
// the session id from, in order.
func (g *Gateway) SessionHeaders() []string { return slices.Clone(g.sessionHeaders) }

// sessionOf returns the session id the request's session headers carry: ""
// when none carries one, or when they carry different values (a request
// attributed to two sessions is attributed to none).
func (g *Gateway) sessionOf(h http.Header) string {
	session := ""
	for _, name := range g.sessionHeaders {
		for _, v := range h.Values(name) {
			switch {
			case v == "":
			case session == "":
				session = v
			case session != v:
				return ""
			}
		}
	}
	return session
}

// validHeaderName reports whether name is an RFC 9110 field name (a token).
func validHeaderName(name string) bool {
	for _, c := range []byte(name) {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("!#$%&'*+-.^_`|~", c) >= 0) {
			return false
		}
	}
	return name != ""
}

// credentialHeader reports whether a header (canonical name) carries
// credentials: Authorization, Proxy-Authorization, Cookie, and any *-Key /
// Api-Key style header (OpenAI's Authorization, Azure's Api-Key, Anthropic's
// X-Api-Key, Google's X-Goog-Api-Key).
func credentialHeader(name string) bool {
	n := strings.ToLower(name)
	switch n {
	case "authorization", "proxy-authorization", "cookie", "set-cookie":
		return true
	}
	return strings.HasSuffix(n, "-key") || strings.HasSuffix(n, "api-key") || strings.Contains(n, "token") || strings.Contains(n, "secret")
}

// Close stops accepting requests, lets in-flight requests finish for up to the
// shutdown grace (then cuts their connections), waits until every request has
// been recorded, and closes the database. It is idempotent: later calls return
// the first call's result. The error joins shutdown and database-close errors
// and, if any request could not be recorded, an error wrapping ErrRecordLost.
func (g *Gateway) Close() error {
	g.closeOnce.Do(func() {
		close(g.closing)
		var errs []error
		ctx, cancel := context.WithTimeout(context.Background(), g.grace)
		if err := g.srv.Shutdown(ctx); err != nil {
			// Grace expired: cancel every request context (aborting upstream
			// round trips) and drop the connections.
			g.cancelBase()
			if cerr := g.srv.Close(); cerr != nil {
				errs = append(errs, fmt.Errorf("gateway: close server: %w", cerr))
			}
		}
		cancel()
		<-g.serveDone
		// From here no handler starts (serveProxy checks closed under mu
		// before joining handlers), so Wait cannot race with Add.
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
		g.handlers.Wait()
		close(g.recordJobs)  // every row is handed to the writer; the record workers end
		g.store.stopWriter() // every row handed over is written (or counted lost) before the check below
		g.cancelBase()
		g.transport.CloseIdleConnections()
		if err := g.inflight.lostError(nil); err != nil {
			errs = append(errs, err)
		}
		if err := g.store.close(); err != nil {
			errs = append(errs, err)
		}
		g.closeErr = errors.Join(errs...)
	})
	return g.closeErr
}

// ServeHTTP serves GET /admin/usage/run/{session_id}, answers 404 for any other
// /admin/ path, and proxies everything else to the upstream while recording it.
func (g *Gateway) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if strings.HasPrefix(r.URL.Path, "/admin/") {
		g.serveAdmin(w, r)
		return
	}
	g.serveProxy(w, r)
}

// copyBuffers is the ReverseProxy's BufferPool: without one it allocates (and the runtime zeroes)
// a 32 KiB copy buffer for every response.
type copyBuffers struct{ pool sync.Pool }

const copyBufferBytes = 32 << 10 // ReverseProxy's own default size

// Get returns a buffer of copyBufferBytes bytes.
func (p *copyBuffers) Get() []byte {
	if b, ok := p.pool.Get().(*[]byte); ok {
		return *b
	}
	return make([]byte, copyBufferBytes)
}

// Put returns buf to the pool.
func (p *copyBuffers) Put(buf []byte) {
	if cap(buf) == copyBufferBytes {
		buf = buf[:copyBufferBytes]
		p.pool.Put(&buf)
	}
}

// exchange is the state of one proxied request, filled in as it progresses.
type exchange struct {
	id       int64 // record id, reserved at arrival
	started  time.Time
	session  string
	body     []byte
	relayErr string
}

func (g *Gateway) serveProxy(w http.ResponseWriter, r *http.Request) {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		// Nothing is forwarded, so nothing goes unrecorded.
		http.Error(w, "assay gateway: closed", http.StatusServiceUnavailable)
		return
	}
	g.handlers.Add(1) // done by a record worker once the row is handed to the writer
	g.mu.RUnlock()
	x := &exchange{
		started: time.Now(),
		session: g.sessionOf(r.Header),
	}
	seq := g.inflight.begin(x.session)
	x.id = g.store.reserveID()
	rw := newRelayWriter(w)
	method, path := r.Method, r.URL.Path
	defer func() {
		p := recover()
		if p != nil && x.relayErr == RelayOK {
			// ReverseProxy aborts with http.ErrAbortHandler when copying the
			// response body fails part-way. One such failure is not a loss:
			// OpenAI-compatible clients hang up as soon as they read the
			// stream's "data: [DONE]" sentinel, which can cancel the
			// upstream read of the transport-level terminator. A stream whose
			// every byte reached the client and whose last event is [DONE]
			// ended by its own protocol, so it counts as fully relayed.
			switch {
			case rw.writeErr == nil && !rw.overflow && sseEndedWithDone(rw.Header(), rw.buf.Bytes()):
			case g.baseCtx.Err() != nil:
				x.relayErr = RelayGatewayClosed
			case r.Context().Err() != nil || rw.writeErr != nil:
				x.relayErr = RelayClientDisconnected
			default:
				x.relayErr = RelayResponseAborted
			}
		}
		// The client's end of the response (the chunked stream's terminator) is written only
		// when this handler returns, so the row is built by a record worker: the client does
		// not wait for the hashing and parsing. The request stays in flight (inflight.end runs
		// once the writer has written its row), so Records, Usage and the usage endpoint still
		// wait for it; Close waits for the row through g.handlers. The header fields the row
		// reads are copied because a ResponseWriter may not be used after its handler returns.
		// A full queue makes the handler wait, so a slow writer still holds back new requests.
		g.recordJobs <- recordJob{x: x, seq: seq,
			resp: relayed{method: method, path: path, header: g.recordedHeader(rw.Header()), ended: time.Now(), rw: rw}}
		if p != nil {
			panic(p)
		}
	}()

	if r.Header.Get("Upgrade") != "" {
		x.relayErr = RelayUpgradeRefused
		http.Error(rw, "assay gateway: protocol upgrades are not relayed", http.StatusNotImplemented)
		return
	}
	body, err := io.ReadAll(r.Body)
	x.body = body
	if err != nil {
		x.relayErr = RelayRequestBodyUnreadable
		http.Error(rw, "assay gateway: request body could not be read", http.StatusBadRequest)
		return
	}
	// Replay the exact bytes read (and hashed) to the upstream.
	r.Body = io.NopCloser(bytes.NewReader(body))
	r.GetBody = func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(body)), nil }
	r.ContentLength = int64(len(body))
	r.TransferEncoding = nil
	r = r.WithContext(withExchange(r.Context(), x))
	// A client that hangs up after the last byte (as the OpenAI client does
	// after "data: [DONE]") got the whole response: failures part-way surface
	// as ReverseProxy's abort panic or its ErrorHandler, not here.
	g.proxy.ServeHTTP(rw, r)
}

// upstreamError is the ReverseProxy ErrorHandler: the round trip failed before
// a response arrived.
func (g *Gateway) upstreamError(w http.ResponseWriter, r *http.Request, err error) {
	if x := exchangeFrom(r.Context()); x != nil {
		switch {
		case g.baseCtx.Err() != nil:
			x.relayErr = RelayGatewayClosed
		case r.Context().Err() != nil:
			x.relayErr = RelayClientDisconnected
		default:
			x.relayErr = RelayUpstreamUnreachable
		}
	}
	g.proxy.ErrorLog.Printf("gateway: upstream round trip for %s %s failed: %v", r.Method, r.URL.Path, withoutURL(err))
	w.WriteHeader(http.StatusBadGateway)
}

// withoutURL drops the request URL (which may carry a query-string API key)
// from a round-trip error before it is logged.
func withoutURL(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

type exchangeKey struct{}

func withExchange(ctx context.Context, x *exchange) context.Context {
	return context.WithValue(ctx, exchangeKey{}, x)
}

func exchangeFrom(ctx context.Context) *exchange {
	x, _ := ctx.Value(exchangeKey{}).(*exchange)
	return x
}

// recordJob is a request whose handler has returned, for a record worker.
type recordJob struct {
	x    *exchange
	seq  uint64
	resp relayed
}

// relayed is what record reads of a response once its handler has returned: the relayWriter's
// hash, count and copy (no longer written to), and the header fields recordedHeader keeps.
type relayed struct {
	method, path string
	header       http.Header
	ended        time.Time // when the handler finished relaying
	rw           *relayWriter
}

// record extracts usage from the relayed response and hands the row to the store's writer. A write
// failure is remembered per session so that Records and Usage refuse instead of
// returning an incomplete picture. It ends the request's in-flight state exactly once: through
// the writer, or here if building the row panics (the request is then counted lost, never
// silently dropped).
func (g *Gateway) record(x *exchange, resp *relayed, seq uint64) {
	handed := false
	defer func() {
		if p := recover(); p != nil && !handed {
			err := fmt.Errorf("record %d (%s %s of session %q): building the row panicked: %v", x.id, resp.method, resp.path, x.session, p)
			g.inflight.lost(x.session, err)
			g.proxy.ErrorLog.Printf("gateway: %v", err)
			g.inflight.end(seq)
		}
	}()
	rw, h := resp.rw, resp.header
	body := rw.buf.Bytes()
	reqSum := sha256.Sum256(x.body)
	meta := parseRequestMeta(x.body)
	rec := Record{
		ID:             x.id,
		SessionID:      x.session,
		Method:         resp.method,
		Path:           resp.path,
		Model:          meta.model,
		Stream:         meta.stream,
		Status:         rw.status,
		LatencyMS:      float64(resp.ended.Sub(x.started)) / float64(time.Millisecond),
		RequestSHA256:  hex.EncodeToString(reqSum[:]),
		ResponseSHA256: hex.EncodeToString(rw.hash.Sum(nil)),
		RequestBytes:   int64(len(x.body)),
		ResponseBytes:  rw.n,
		RelayError:     x.relayErr,
		StartedAt:      x.started.UTC(),
		EchoedSession:  g.echoedSession(h),
	}
	u := unknownUsage()
	if x.relayErr == RelayOK && !rw.overflow {
		rb := readBody(rw.status, h, meta.stream, body)
		if rb.streamUnterminated(resp.path, meta.stream) {
			rec.RelayError = RelayStreamUnterminated
		} else {
			u = rb.usage(meta)
			rec.AnsweredModel = rb.answeredModel()
			switch {
			case rb.identity:
				rec.ResponseDecodedSHA256 = rec.ResponseSHA256 // the same bytes, already hashed
			case rb.decodedOK:
				sum := sha256.Sum256(rb.decoded)
				rec.ResponseDecodedSHA256 = hex.EncodeToString(sum[:])
			}
		}
	}
	rec.UsageState = u.state
	rec.PromptTokens = u.prompt
	rec.CompletionTokens = u.completion
	rec.TotalTokens = u.total
	rec.CachedTokens = u.cached
	rec.ReasoningTokens = u.reasoning
	// The writer ends the request's in-flight state once the row is written (or lost), so
	// Records and the usage endpoint still see every request that has received its response.
	handed = true
	g.store.enqueue(&rec, func(err error) {
		if err != nil {
			g.inflight.lost(x.session, err)
			g.proxy.ErrorLog.Printf("gateway: %v", err)
		}
		g.inflight.end(seq)
	})
}

// recordedHeader copies, from a response header, the fields record reads: Content-Type,
// Content-Encoding and the session headers.
func (g *Gateway) recordedHeader(h http.Header) http.Header {
	out := make(http.Header, 2+len(g.sessionHeaders))
	for _, name := range g.recordedHeaders {
		if v, ok := h[name]; ok {
			out[name] = slices.Clone(v)
		}
	}
	return out
}

// echoedSession joins, with ", ", the values of the session headers the response carried back.
func (g *Gateway) echoedSession(h http.Header) string {
	var vals []string
	for _, name := range g.sessionHeaders {
		vals = append(vals, h.Values(name)...)
	}
	return strings.Join(vals, ", ")
}

// relayWriter relays the response to the client unchanged while hashing every
// byte written, counting them, and keeping a bounded copy for usage
// extraction. It is used by one handler goroutine at a time (ReverseProxy
// serialises writes and flushes).
type relayWriter struct {
	http.ResponseWriter
	status   int
	hash     hash.Hash
	n        int64
	buf      bytes.Buffer
	overflow bool
	writeErr error
}

func newRelayWriter(w http.ResponseWriter) *relayWriter {
	return &relayWriter{ResponseWriter: w, hash: sha256.New()}
}

// WriteHeader records the final status; 1xx informational responses are passed
// through without being taken as the status.
func (w *relayWriter) WriteHeader(code int) {
	if code >= 200 && w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *relayWriter) Write(p []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(p)
	written := p[:n]
	_, _ = w.hash.Write(written) // hash.Hash.Write never returns an error
	w.n += int64(n)
	if !w.overflow {
		if w.buf.Len()+n > maxUsageBodyBytes {
			w.overflow = true
			w.buf = bytes.Buffer{}
		} else {
			w.buf.Write(written)
		}
	}
	if err != nil && w.writeErr == nil {
		w.writeErr = err
	}
	return n, err
}

// Flush lets ReverseProxy push each SSE chunk to the client as it arrives.
func (w *relayWriter) Flush() {
	_ = http.NewResponseController(w.ResponseWriter).Flush()
}

// Unwrap exposes the underlying writer to http.ResponseController.
func (w *relayWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

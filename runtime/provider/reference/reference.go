// Package reference is assay's embedded reference provider: an
// OpenAI-compatible chat-completions server that answers assay's structured
// task assignments deterministically. It is not a language model; its only
// model id is ModelID, and results obtained with it are reference results.
//
// # Endpoints
//
//   - GET  /v1/models and GET /v1/models/{id}: the one model, ModelID.
//   - POST /v1/chat/completions: non-streaming, or streaming as server-sent
//     events when "stream" is true. With stream_options.include_usage the
//     usage travels in a final chunk with empty "choices", then
//     "data: [DONE]". Content and tool-call arguments are split over several
//     chunks so that clients' joining is exercised.
//
// A request for another model is answered 404 and a malformed body 400, both
// with an OpenAI-style {"error":{...}} body.
//
// # Replies
//
// The reply depends only on the request and on the session's turn (see
// Faults). The last user message carrying an Assignment line (see
// AssignmentPrefix) decides:
//
//  1. No tool message after it: one write_file tool call per file of the
//     assignment, in order, finish_reason "tool_calls", arguments
//     {"path":"<file>","content":"<text>"}. The call id is "call_" followed by
//     the first 12 hex digits of SHA-256(session + "\n" + turn + "\n" + file),
//     turn in decimal. When the request offers no write_file tool, or the
//     assignment cannot be carried out, the reply is content saying why,
//     finish_reason "stop".
//  2. Tool messages after it: content {"status":"done","files":[...]} with the
//     assignment's files in order, or {"status":"failed","error":"..."} when a
//     tool result's content starts with "error" (ignoring case and leading
//     whitespace); the error is that first failing result's content. Finish
//     "stop".
//
// File contents for TaskDouble. Go (the default language): a file ending
// "_test.go" gets a table-driven test of Double for int and float64 in
// package Package; any other ".go" file gets
//
//	package <Package>
//
//	// Double returns 2*x.
//	func Double[T int | float64](x T) T { return 2 * x }
//
// When no file is a non-test file (the single-file profile), the first test
// file also holds Double. Python: a module file (e.g. double.py) gets
// "def double(x):\n    return 2 * x\n"; a test file (test_*.py or *_test.py)
// gets a pytest test importing double from the first module file, or
// defining double itself when there is none. Other extensions, an unknown
// task or language, or an invalid package name are explained in the reply
// content instead.
//
// Without an assignment the reply is NoAssignmentReply, finish "stop".
// Response ids are "chatcmpl-" followed by the first 24 hex digits of
// SHA-256(session + "\n" + turn), and "created" is always Created, so equal
// requests at equal turns get byte-identical bodies.
//
// # Usage rule
//
// Every response reports usage computed by this rule, which anyone can
// reproduce from the request and reply bytes. For a message, let n be the
// byte length of its content (text parts joined when content is an array),
// plus the byte length of every tool call's function name and arguments
// (arguments as the JSON text received; an object is taken as its compact
// JSON), plus the byte length of its tool_call_id. Then
//
//	prompt_tokens     = sum over request messages of (4 + ceil(n / 4))
//	completion_tokens = max(1, ceil(m / 4)), m = byte length of the reply
//	                    content plus every reply tool call's name and arguments
//	total_tokens      = prompt_tokens + completion_tokens
//
// and prompt_tokens_details.cached_tokens and
// completion_tokens_details.reasoning_tokens are 0.
//
// # Faults
//
// Config.Faults script failures so the harness can be tested against them.
// The server counts chat-completion requests per session id (the value of
// the session header, "" when absent); a request's turn is the 0-based count
// of that session's requests before it, every POST counted, failed ones
// included. A fault applies when its Member matches the session and its Turn
// matches the turn.
//
// A Server is safe for concurrent use; its only state is the turn counters.
package reference

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
)

// Identity and fixed values of the reference provider.
const (
	// ModelID is the only model the reference provider serves.
	ModelID = "assay-reference-1"
	// Created is the "created" value (Unix seconds, 2025-01-01T00:00:00Z) of
	// every object the server returns, fixed so that bodies are
	// deterministic.
	Created int64 = 1735689600
	// DefaultSessionHeader is the session header read when
	// Config.SessionHeader is empty.
	DefaultSessionHeader = "X-Session-Id"
	// WriteFileTool is the tool the reply to an assignment calls.
	WriteFileTool = "write_file"
	// NoAssignmentReply is the content of the reply to a request that
	// carries no assignment.
	NoAssignmentReply = "assay-reference-1 answers only assay task assignments"
	// MaxRequestBytes bounds a request body (8 MiB); a larger one is 400.
	MaxRequestBytes = 8 << 20
)

// Fault kinds.
const (
	// FaultDropUsage omits usage from the response: no "usage" key when not
	// streaming, no usage chunk when streaming.
	FaultDropUsage = "drop_usage"
	// FaultHTTP500 answers 500 with an OpenAI-style JSON error body.
	FaultHTTP500 = "http_500"
)

// ErrInvalidConfig is returned, wrapped, by New and Start for a Config they
// cannot serve: an unknown fault kind, a turn below -1, or an invalid
// session header name.
var ErrInvalidConfig = errors.New("reference: invalid config")

// Fault scripts one failure.
type Fault struct {
	// Member matches a request whose session id ends with "-"+Member, or
	// equals Member; "" matches any session.
	Member string
	// Turn is the 0-based index of that session's requests; -1 matches every
	// turn.
	Turn int
	// Kind is FaultDropUsage or FaultHTTP500.
	Kind string
}

func (f Fault) matches(session string, turn int) bool {
	if f.Member != "" && session != f.Member && !strings.HasSuffix(session, "-"+f.Member) {
		return false
	}
	return f.Turn == -1 || f.Turn == turn
}

// Config configures a Server.
type Config struct {
	// Faults are the scripted failures; none when empty.
	Faults []Fault
	// SessionHeader names the header carrying the session id; default
	// DefaultSessionHeader.
	SessionHeader string
}

// Server is the reference provider's HTTP handler and its per-session turn
// counters. It is safe for concurrent use.
type Server struct {
	faults  []Fault
	header  string
	handler http.Handler

	mu    sync.Mutex
	turns map[string]int
}

// New validates cfg and returns a Server. It returns ErrInvalidConfig
// (wrapped) for an unknown fault kind, a fault turn below -1 or a session
// header that is not a valid header name.
func New(cfg Config) (*Server, error) {
	s := &Server{header: cfg.SessionHeader, turns: map[string]int{}}
	if s.header == "" {
		s.header = DefaultSessionHeader
	}
	if !validHeaderName(s.header) {
		return nil, fmt.Errorf("%w: session header %q is not a valid header name", ErrInvalidConfig, s.header)
	}
	for i, f := range cfg.Faults {
		if f.Kind != FaultDropUsage && f.Kind != FaultHTTP500 {
			return nil, fmt.Errorf("%w: fault %d has unknown kind %q (want %q or %q)", ErrInvalidConfig, i, f.Kind, FaultDropUsage, FaultHTTP500)
		}
		if f.Turn < -1 {
			return nil, fmt.Errorf("%w: fault %d has turn %d (want -1 for every turn, or >= 0)", ErrInvalidConfig, i, f.Turn)
		}
	}
	s.faults = append([]Fault(nil), cfg.Faults...)
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.listModels)
	mux.HandleFunc("GET /v1/models/{id}", s.getModel)
	mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	s.handler = mux
	return s, nil
}

// Handler returns the server's HTTP handler; its routes start with /v1/.
func (s *Server) Handler() http.Handler { return s.handler }

// Turns returns how many chat-completion requests the server has received
// for session so far (the turn the next one will have).
func (s *Server) Turns(session string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turns[session]
}

// nextTurn returns session's turn for this request and counts it.
func (s *Server) nextTurn(session string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.turns[session]
	s.turns[session] = t + 1
	return t
}

func (s *Server) faulted(kind, session string, turn int) bool {
	for _, f := range s.faults {
		if f.Kind == kind && f.matches(session, turn) {
			return true
		}
	}
	return false
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

func referenceModel() modelObject {
	return modelObject{ID: ModelID, Object: "model", Created: Created, OwnedBy: "assay"}
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelObject{referenceModel()}})
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); id != ModelID {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model", "model_not_found",
			fmt.Sprintf("The model `%s` does not exist; this server serves only %s.", id, ModelID))
		return
	}
	writeJSON(w, http.StatusOK, referenceModel())
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	session := r.Header.Get(s.header)
	turn := s.nextTurn(session)

	if s.faulted(FaultHTTP500, session, turn) {
		writeError(w, http.StatusInternalServerError, "server_error", "", "reference_fault_http_500",
			fmt.Sprintf("scripted fault %s for session %q turn %d", FaultHTTP500, session, turn))
		return
	}
	req, err := decodeChatRequest(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid_body", err.Error())
		return
	}
	if req.Model != ModelID {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model", "model_not_found",
			fmt.Sprintf("The model `%s` does not exist; this server serves only %s.", req.Model, ModelID))
		return
	}
	rep := answer(req, session, turn)
	id := "chatcmpl-" + shortHash(24, session, strconv.Itoa(turn))
	var usage *usageObject
	if !s.faulted(FaultDropUsage, session, turn) {
		u := computeUsage(req, rep)
		usage = &u
	}
	if req.Stream {
		includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		writeStream(w, id, rep, usage, includeUsage)
		return
	}
	writeJSON(w, http.StatusOK, completionBody(id, rep, usage))
}

// reply is the assistant turn the server decided on.
type reply struct {
	content   string
	toolCalls []replyToolCall
	finish    string
}

type replyToolCall struct {
	id, name, arguments string
}

type writeFileArgs struct {
	Path    string `json:"path"`
	Content string `json:"content"`
}

type statusReply struct {
	Status string   `json:"status"`
	Files  []string `json:"files,omitempty"`
	Error  string   `json:"error,omitempty"`
}

// answer decides the reply; see the package documentation.
func answer(req *chatRequest, session string, turn int) reply {
	at := -1
	var a Assignment
	for i := len(req.Messages) - 1; i >= 0; i-- {
		m := req.Messages[i]
		if m.Role != "user" {
			continue
		}
		if got, ok := ParseAssignment(m.text); ok {
			at, a = i, got
			break
		}
	}
	if at < 0 {
		return reply{content: NoAssignmentReply, finish: "stop"}
	}
	var results []requestMessage
	for _, m := range req.Messages[at+1:] {
		if m.Role == "tool" {
			results = append(results, m)
		}
	}
	if len(results) > 0 {
		st := statusReply{Status: "done", Files: a.Files}
		for _, m := range results {
			if strings.HasPrefix(strings.ToLower(strings.TrimSpace(m.text)), "error") {
				st = statusReply{Status: "failed", Error: m.text}
				break
			}
		}
		if st.Status == "done" && st.Files == nil {
			st.Files = []string{}
		}
		return reply{content: string(compactJSON(st)), finish: "stop"}
	}
	if !req.offersTool(WriteFileTool) {
		return reply{content: ModelID + " needs a " + WriteFileTool + " tool to carry out this assignment, and the request offers none", finish: "stop"}
	}
	files, err := planFiles(a)
	if err != nil {
		return reply{content: ModelID + " cannot carry out this assignment: " + err.Error(), finish: "stop"}
	}
	rep := reply{finish: "tool_calls"}
	for _, f := range files {
		rep.toolCalls = append(rep.toolCalls, replyToolCall{
			id:        "call_" + shortHash(12, session, strconv.Itoa(turn), f.path),
			name:      WriteFileTool,
			arguments: string(compactJSON(writeFileArgs{Path: f.path, Content: f.content})),
		})
	}
	return rep
}

// shortHash is the first n hex digits of SHA-256 of parts joined with "\n".
func shortHash(n int, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:])[:n]
}

// compactJSON encodes v without HTML escaping and without a trailing
// newline. v is always one of this package's plain structs, which encode.
func compactJSON[T writeFileArgs | statusReply | completion | chunk | modelList | modelObject | errorBody](v T) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// validHeaderName reports whether s is an RFC 9110 token.
func validHeaderName(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		ch := s[i]
		switch {
		case ch >= 'a' && ch <= 'z', ch >= 'A' && ch <= 'Z', ch >= '0' && ch <= '9':
		case strings.IndexByte("!#$%&'*+-.^_`|~", ch) >= 0:
		default:
			return false
		}
	}
	return true
}

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
//   - PUT and GET /v1/effects/{key}: the effect service, a stand-in remote
//     backend with receipts kept in SQLite (Config.EffectsDB); see
//     effects.go and EffectsReader.
//
// A request for another model is answered 404 and a malformed body 400, both
// with an OpenAI-style {"error":{...}} body.
//
// # Replies
//
// The reply depends only on the request and on the session's turn (see
// Faults). The server reads the member's current invocation from the last
// user message that carries an Assignment line (see AssignmentPrefix) or a
// contract line (see ContractPrefix; a message with an assignment and no
// contract line asks for the "completion" contract). The tool messages after
// that user message are the invocation's tool results.
//
//  1. No tool result yet, and the invocation writes (it has an assignment
//     with files and its contract is "completion" or "ensemble_proposal",
//     a "speaking_turn" with prior_turns 0, or a "consensus_proposal" in
//     round 1): one write_file tool call per file of the assignment, in
//     order, finish_reason "tool_calls", arguments
//     {"path":"<file>","content":"<text>"}. The call id is "call_" followed by
//     the first 12 hex digits of SHA-256(session + "\n" + turn + "\n" + file),
//     turn in decimal. When the request offers no write_file tool, or the
//     assignment cannot be carried out, the reply is content saying why,
//     finish_reason "stop".
//  2. No tool result yet, contract "critic_verdict" with files, and the
//     request offers read_file: one read_file call per file, ids as above.
//  3. Contract "completion" with an assignment, tool results that all
//     succeeded, no remote_put call yet in this invocation, and the request
//     offers remote_put (RemotePutTool): one remote_put call publishing what
//     was written, arguments {"name":"<task>/<member_id>","value":"<task>/
//     <language>/<files, comma-separated>"}, call id "call_" + the first 12
//     hex digits of SHA-256(session + "\n" + turn + "\n" + "remote_put").
//  4. Otherwise the structured reply of the contract, finish "stop". "Failed"
//     below means a tool result's content starts with "error" (ignoring case
//     and leading whitespace); the first such result is quoted.
//     - completion: {"status":"done","files":[...]} with the assignment's
//     files when they were written, else []; or {"status":"failed",
//     "error":"<first failing result>"}; with "quality_score":true in the
//     contract line also "quality_score": QualityScore (0 when failed).
//     - critic_verdict: "needs_work" when a read failed or the contract's
//     round is below the assignment's SatisfiedAt, else "satisfied"; the
//     feedback is never empty.
//     - judge_verdict: the first candidate, with a verdict sentence.
//     - ensemble_judge: the first candidate whose vote key is the most common
//     of the contract's vote_keys.
//     - synthesis: {"answer":"synthesis of <candidates, comma-separated>"}.
//     - router: {"speaker_id": candidates[(round-1) mod n]}.
//     - speaking_turn: content naming the member and turn (and the files
//     written); with may_hand_off the next candidate after the member as
//     handoff_to, or done for the last candidate; otherwise done once round
//     >= the number of candidates, except in a debate (never done).
//     - consensus_proposal: consensus_key = task/language/files of the
//     assignment ("double/go/double.go,double_test.go"), equal for every
//     member of one assignment, or "no-assignment".
//     - ensemble_proposal: vote_key as consensus_key above, answer naming
//     the files written in the member's directory.
//     An unknown contract is answered with content saying so.
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
// matches the turn. The kinds are FaultKinds(): drop usage, HTTP 500, HTTP 500
// after a tool-call reply, malformed structured JSON, a scripted reply, split
// tool arguments, a slow reply, a wrong session echo, miscounted usage, and HTTP 500 from the
// effect service after it committed (FaultHTTP500AfterCommit: its turn is
// that of the reply that issued the remote_put call). Every chat response
// echoes the session header it received (the wrong_session fault echoes
// another), and the model object declares max_parallel_requests
// (Config.ParallelCapacity).
//
// A Server is safe for concurrent use; its state is the turn counters, the
// remote_put calls it issued, and the effects database.
package reference

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/net/http/httpguts"
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
	// FaultHTTP500AfterToolCall answers 500 to a request whose session's
	// previous reply was a tool-call reply (the tools may have run and
	// committed; the model request failed after). Turn selects the request
	// that gets the 500, not the tool-call reply.
	FaultHTTP500AfterToolCall = "http_500_after_tool_call"
	// FaultMalformedJSON cuts a structured (content) reply to its first half,
	// so it is no longer valid JSON. A tool-call reply at that turn is sent
	// unchanged.
	FaultMalformedJSON = "malformed_json"
	// FaultReplaceReply answers Fault.Reply as the content, verbatim, with
	// finish "stop" and no tool calls: a scripted malformed or contract-
	// breaking reply (extra keys, prose, an unknown member id, ...).
	FaultReplaceReply = "replace_reply"
	// FaultSplitToolArgs streams tool-call arguments in pieces of at most
	// SplitArgumentsBytes bytes, the calls' fragments interleaved after all
	// the calls' header fragments. A non-streaming reply is unchanged.
	FaultSplitToolArgs = "split_tool_args"
	// FaultSlow waits Fault.Delay (DefaultSlowDelay when 0) before
	// answering, or until the client goes away.
	FaultSlow = "slow"
	// FaultWrongSession echoes a session id other than the one received in
	// the session response header.
	FaultWrongSession = "wrong_session"
	// FaultMiscountUsage reports one prompt token more than the usage rule
	// gives (and a total to match): a provider that miscounts consistently,
	// which only a recomputation of the rule can catch.
	FaultMiscountUsage = "miscount_usage"
	// FaultHTTP500AfterCommit (effects.go) answers 500 to the effect
	// service's PUT that committed a remote_put effect issued at the turn;
	// FaultHangAfterCommit (effects.go) never answers it.
)

// FaultKinds returns every fault kind, in documentation order; a new slice on every call.
func FaultKinds() []string {
	return []string{FaultDropUsage, FaultHTTP500, FaultHTTP500AfterToolCall, FaultMalformedJSON,
		FaultReplaceReply, FaultSplitToolArgs, FaultSlow, FaultWrongSession, FaultMiscountUsage, FaultHTTP500AfterCommit, FaultHangAfterCommit}
}

// DefaultSlowDelay is FaultSlow's delay when Fault.Delay is 0: past the
// runtime's default 60 s request timeout.
const DefaultSlowDelay = 61 * time.Second

// SplitArgumentsBytes is the largest argument piece under FaultSplitToolArgs.
const SplitArgumentsBytes = 3

// ErrInvalidConfig is returned, wrapped, by New and Start for a Config they
// cannot serve: an unknown fault kind, a turn below -1, a replace_reply fault
// without a reply, a negative delay, or an invalid session header name.
var ErrInvalidConfig = errors.New("reference: invalid config")

// Fault scripts one failure.
type Fault struct {
	// Member matches a request whose session id ends with "-"+Member, or
	// equals Member; "" matches any session.
	Member string
	// Turn is the 0-based index of that session's requests; -1 matches every
	// turn.
	Turn int
	// Kind is one of FaultKinds.
	Kind string
	// Reply is the content FaultReplaceReply answers (required for it).
	Reply string
	// Delay is FaultSlow's wait (0 = DefaultSlowDelay).
	Delay time.Duration
}

func (f Fault) matches(session string, turn int) bool {
	if f.Member != "" && session != f.Member && !strings.HasSuffix(session, "-"+f.Member) {
		return false
	}
	return f.Turn == -1 || f.Turn == turn
}

// ParseFault parses the command-line form MEMBER:TURN:KIND[:ARG] used by
// `assay provider serve --faults` and `assay matrix run --reference-fault`:
// MEMBER may be empty (every session), TURN is an integer >= -1, ARG is the
// reply of replace_reply (the rest of the text, colons included) or the
// delay of slow (a Go duration such as "2s"). It returns ErrInvalidConfig
// (wrapped) naming the problem.
func ParseFault(spec string) (Fault, error) {
	parts := strings.SplitN(spec, ":", 4)
	if len(parts) < 3 {
		return Fault{}, fmt.Errorf("%w: fault %q: want MEMBER:TURN:KIND[:ARG]", ErrInvalidConfig, spec)
	}
	turn, err := strconv.Atoi(parts[1])
	if err != nil || turn < -1 {
		return Fault{}, fmt.Errorf("%w: fault %q: turn must be an integer >= -1", ErrInvalidConfig, spec)
	}
	f := Fault{Member: parts[0], Turn: turn, Kind: parts[2]}
	if len(parts) == 4 {
		switch f.Kind {
		case FaultReplaceReply:
			f.Reply = parts[3]
		case FaultSlow:
			d, err := time.ParseDuration(parts[3])
			if err != nil {
				return Fault{}, fmt.Errorf("%w: fault %q: delay: %v", ErrInvalidConfig, spec, err)
			}
			f.Delay = d
		default:
			return Fault{}, fmt.Errorf("%w: fault %q: kind %s takes no argument", ErrInvalidConfig, spec, f.Kind)
		}
	}
	if err := f.validate(); err != nil {
		return Fault{}, fmt.Errorf("%w: fault %q: %s", ErrInvalidConfig, spec, err)
	}
	return f, nil
}

// validate checks one fault; the message says what is wrong.
func (f Fault) validate() error {
	if !slices.Contains(FaultKinds(), f.Kind) {
		return fmt.Errorf("unknown kind %q (want one of %s)", f.Kind, strings.Join(FaultKinds(), ", "))
	}
	if f.Turn < -1 {
		return fmt.Errorf("turn %d (want -1 for every turn, or >= 0)", f.Turn)
	}
	if f.Kind == FaultReplaceReply && f.Reply == "" {
		return errors.New("replace_reply needs the reply text")
	}
	if f.Delay < 0 {
		return fmt.Errorf("negative delay %v", f.Delay)
	}
	return nil
}

// Config configures a Server.
type Config struct {
	// Faults are the scripted failures; none when empty.
	Faults []Fault
	// SessionHeader names the header carrying the session id; default
	// DefaultSessionHeader. Every chat response echoes it.
	SessionHeader string
	// ParallelCapacity is the max_parallel_requests the model object
	// declares: 0 means DefaultParallelCapacity, a negative value declares
	// none (for testing clients that must refuse to guess).
	ParallelCapacity int
	// EffectsDB is the SQLite file where the effect service (effects.go)
	// keeps its receipts and committed values, created when missing; ""
	// keeps them in memory for the life of the Server. Start opens it at
	// once (a bad path fails Start); New opens it on the first effect
	// request.
	EffectsDB string
	// Model is the model id the server serves and answers with (GET
	// /v1/models, every completion's "model"); "" means ModelID. Two
	// servers with different ids stand for two models of a matrix; what
	// they answer is the same.
	Model string
	// Solutions are reference solutions the server answers assignments with, besides its own for
	// TaskDouble: an assignment whose task, language and files (as a set) equal a Solution's is
	// answered by writing the Solution's files. They come from a task file's reference_solution
	// (harness: Options.Task); the server is not a model, and such an answer is the task author's
	// solution written back. A Solution for TaskDouble takes precedence over the built-in one.
	Solutions []Solution
}

// Solution is the content the server writes for one task, language and file set.
type Solution struct {
	// Task is the assignment's task name, Language LanguageGo or LanguagePython.
	Task, Language string
	// Files maps each file name (relative to the member's directory) to its content.
	Files map[string]string
}

// DefaultParallelCapacity is the parallel capacity the model object declares
// by default.
const DefaultParallelCapacity = 4

// Server is the reference provider's HTTP handler and its per-session turn
// counters. It is safe for concurrent use.
type Server struct {
	faults []Fault
	// solutions are Config.Solutions, copied; read-only after New.
	solutions []Solution
	header    string
	model     string
	capacity  int
	handler   http.Handler

	mu    sync.Mutex
	turns map[string]int
	// toolCallLast records sessions whose last reply was a tool-call reply.
	toolCallLast map[string]bool

	// issued maps the remote_put call ids of this server's replies to the
	// session and turn that issued them (FaultHTTP500AfterCommit).
	issued map[string]issuedCall

	// busy is the summed wall time of chat-completion handlers, nanoseconds.
	busy atomic.Int64

	// The effect service's database, opened once (effects.go).
	effectsPath string
	effMu       sync.Mutex
	eff         *effectStore
	closed      bool
}

// HandlerTime is the summed wall time the server spent in chat-completion
// handlers (a FaultSlow wait included), for separating the stand-in model's
// time from its client's when measuring.
func (s *Server) HandlerTime() time.Duration { return time.Duration(s.busy.Load()) }

// New validates cfg and returns a Server. It returns ErrInvalidConfig
// (wrapped) for an unknown fault kind, a fault turn below -1 or a session
// header that is not a valid header name.
func New(cfg Config) (*Server, error) {
	s := &Server{header: cfg.SessionHeader, turns: map[string]int{}, toolCallLast: map[string]bool{}, capacity: cfg.ParallelCapacity,
		issued: map[string]issuedCall{}, effectsPath: cfg.EffectsDB, model: cfg.Model}
	if s.model == "" {
		s.model = ModelID
	}
	if !validModelID(s.model) {
		return nil, fmt.Errorf("%w: model id %q is not 1..128 printable characters without spaces", ErrInvalidConfig, s.model)
	}
	if s.capacity == 0 {
		s.capacity = DefaultParallelCapacity
	}
	if s.header == "" {
		s.header = DefaultSessionHeader
	}
	if !httpguts.ValidHeaderFieldName(s.header) { // an RFC 9110 token
		return nil, fmt.Errorf("%w: session header %q is not a valid header name", ErrInvalidConfig, s.header)
	}
	for i, f := range cfg.Faults {
		if err := f.validate(); err != nil {
			return nil, fmt.Errorf("%w: fault %d: %s", ErrInvalidConfig, i, err)
		}
	}
	s.faults = append([]Fault(nil), cfg.Faults...)
	for i, sol := range cfg.Solutions {
		if sol.Task == "" || len(sol.Files) == 0 {
			return nil, fmt.Errorf("%w: solution %d names no task or no files", ErrInvalidConfig, i)
		}
		s.solutions = append(s.solutions, Solution{Task: sol.Task, Language: sol.Language, Files: maps.Clone(sol.Files)})
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /v1/models", s.listModels)
	mux.HandleFunc("GET /v1/models/{id}", s.getModel)
	mux.HandleFunc("POST /v1/chat/completions", s.chatCompletions)
	mux.HandleFunc("PUT /v1/effects/{key}", s.putEffect)
	mux.HandleFunc("GET /v1/effects/{key}", s.getEffect)
	s.handler = mux
	return s, nil
}

// Handler returns the server's HTTP handler; its routes start with /v1/. A
// Server used through Handler alone should be closed (Close) to release its
// effects database.
func (s *Server) Handler() http.Handler { return s.handler }

// Turns returns how many chat-completion requests the server has received
// for session so far (the turn the next one will have).
func (s *Server) Turns(session string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.turns[session]
}

// nextTurn returns session's turn for this request and counts it, and
// whether the session's previous reply was a tool-call reply.
func (s *Server) nextTurn(session string) (turn int, afterToolCall bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	t := s.turns[session]
	s.turns[session] = t + 1
	after := s.toolCallLast[session]
	delete(s.toolCallLast, session)
	return t, after
}

func (s *Server) setToolCallLast(session string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.toolCallLast[session] = true
}

// fault returns the first fault of kind matching session and turn.
func (s *Server) fault(kind, session string, turn int) (Fault, bool) {
	for _, f := range s.faults {
		if f.Kind == kind && f.matches(session, turn) {
			return f, true
		}
	}
	return Fault{}, false
}

func (s *Server) faulted(kind, session string, turn int) bool {
	_, ok := s.fault(kind, session, turn)
	return ok
}

type modelObject struct {
	ID      string `json:"id"`
	Object  string `json:"object"`
	Created int64  `json:"created"`
	OwnedBy string `json:"owned_by"`
	// MaxParallelRequests is the declared parallel capacity (LiteLLM's
	// model-info name); absent when the server declares none.
	MaxParallelRequests *int `json:"max_parallel_requests,omitempty"`
}

type modelList struct {
	Object string        `json:"object"`
	Data   []modelObject `json:"data"`
}

func (s *Server) referenceModel() modelObject {
	m := modelObject{ID: s.model, Object: "model", Created: Created, OwnedBy: "assay"}
	if s.capacity > 0 {
		c := s.capacity
		m.MaxParallelRequests = &c
	}
	return m
}

func (s *Server) listModels(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, modelList{Object: "list", Data: []modelObject{s.referenceModel()}})
}

func (s *Server) getModel(w http.ResponseWriter, r *http.Request) {
	if id := r.PathValue("id"); id != s.model {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model", "model_not_found",
			fmt.Sprintf("The model `%s` does not exist; this server serves only %s.", id, s.model))
		return
	}
	writeJSON(w, http.StatusOK, s.referenceModel())
}

func (s *Server) chatCompletions(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	defer func() { s.busy.Add(int64(time.Since(start))) }()
	session := r.Header.Get(s.header)
	turn, afterToolCall := s.nextTurn(session)
	if session != "" {
		echo := session
		if s.faulted(FaultWrongSession, session, turn) {
			echo = session + "-other"
		}
		w.Header().Set(s.header, echo)
	}
	if f, ok := s.fault(FaultSlow, session, turn); ok {
		delay := f.Delay
		if delay == 0 {
			delay = DefaultSlowDelay
		}
		timer := time.NewTimer(delay)
		select {
		case <-r.Context().Done():
			timer.Stop()
			return // the client gave up; nothing can be said to it
		case <-timer.C:
		}
	}
	if s.faulted(FaultHTTP500, session, turn) {
		writeError(w, http.StatusInternalServerError, "server_error", "", "reference_fault_http_500",
			fmt.Sprintf("scripted fault %s for session %q turn %d", FaultHTTP500, session, turn))
		return
	}
	if afterToolCall && s.faulted(FaultHTTP500AfterToolCall, session, turn) {
		writeError(w, http.StatusInternalServerError, "server_error", "", "reference_fault_http_500_after_tool_call",
			fmt.Sprintf("scripted fault %s for session %q turn %d", FaultHTTP500AfterToolCall, session, turn))
		return
	}
	req, err := decodeChatRequest(http.MaxBytesReader(w, r.Body, MaxRequestBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid_body", err.Error())
		return
	}
	if req.Model != s.model {
		writeError(w, http.StatusNotFound, "invalid_request_error", "model", "model_not_found",
			fmt.Sprintf("The model `%s` does not exist; this server serves only %s.", req.Model, s.model))
		return
	}
	rep := answer(req, session, turn, s.solutions)
	if f, ok := s.fault(FaultReplaceReply, session, turn); ok {
		rep = reply{content: f.Reply, finish: "stop"}
	}
	if len(rep.toolCalls) == 0 && s.faulted(FaultMalformedJSON, session, turn) {
		rep.content = rep.content[:len(rep.content)/2]
	}
	if len(rep.toolCalls) > 0 {
		s.setToolCallLast(session)
		s.recordIssued(rep, session, turn)
	}
	id := "chatcmpl-" + shortHash(24, session, strconv.Itoa(turn))
	var usage *usageObject
	if !s.faulted(FaultDropUsage, session, turn) {
		u := computeUsage(req, rep)
		if s.faulted(FaultMiscountUsage, session, turn) {
			u.PromptTokens++
			u.TotalTokens++
		}
		usage = &u
	}
	if req.Stream {
		includeUsage := req.StreamOptions != nil && req.StreamOptions.IncludeUsage
		writeStream(w, s.model, id, rep, usage, includeUsage, s.faulted(FaultSplitToolArgs, session, turn))
		return
	}
	body := completionBody(id, rep, usage)
	body.Model = s.model
	writeJSON(w, http.StatusOK, body)
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

// shortHash is the first n hex digits of SHA-256 of parts joined with "\n".
func shortHash(n int, parts ...string) string {
	sum := sha256.Sum256([]byte(strings.Join(parts, "\n")))
	return hex.EncodeToString(sum[:])[:n]
}

// compactJSON encodes v without HTML escaping and without a trailing
// newline. v is always one of this package's plain structs, which encode.
func compactJSON[T writeFileArgs | readFileArgs | remotePutArgs | EffectReceipt | statusReply | failedReply | verdictReply | judgeReply | selectReply | answerReply |
	routerReply | turnReply | proposalReply | voteReply | completion | chunk | modelList | modelObject | errorBody](v T) []byte {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	return bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
}

// validModelID reports whether id is 1..128 bytes of printable ASCII without
// spaces: it travels in URLs (/v1/models/{id}) and JSON bodies.
func validModelID(id string) bool {
	if len(id) == 0 || len(id) > 128 {
		return false
	}
	for i := 0; i < len(id); i++ {
		if id[i] <= ' ' || id[i] > '~' || id[i] == '/' {
			return false
		}
	}
	return true
}

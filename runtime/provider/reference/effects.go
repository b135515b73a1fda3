package reference

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/gowebpki/jcs"

	"github.com/assay-audit/assay/runtime/effect"
)

// The reference effect service: a stand-in for a remote backend that members
// change through the network tool remote_put, and whose receipts
// reconciliation can look up after a response was lost.
//
//	PUT {base}/effects/{key}   body {"name":"...","value":"..."}
//	GET {base}/effects/{key}
//
// {base} is the provider's base path (/v1) and {key} the effect's idempotency
// key, path-escaped. The Idempotency-Key header, when sent, must equal it
// (draft-ietf-httpapi-idempotency-key-header). The first PUT of a key commits
// value under name and records a receipt: 201 with the receipt. Every later
// PUT of that key commits nothing: 200 with the existing receipt when its
// body is the same, 422 when the body differs (a key reused for another
// payload is refused, as the draft recommends); both are counted in the
// receipt's Puts. GET answers 200 with the receipt, 404 when the key has
// none. A malformed key or body is 400 and changes nothing. Errors use the
// OpenAI-style {"error":{...}} body of the chat endpoint.
//
// Receipts persist in a SQLite database (Config.EffectsDB; in memory when
// empty), so another process serving or reading the same file
// (OpenEffectsReader) finds them. Concurrent PUTs of one key, from any number
// of processes, commit once: the check and the commit are one SQLite write
// transaction.
//
// Under FaultHTTP500AfterCommit the committing PUT of a remote_put call that
// this server's reply issued at the fault's member and turn is answered 500
// after the commit, as a backend whose response was lost would answer.

// Effect service names and limits.
const (
	// RemotePutTool is the network tool whose calls the reference provider's
	// executors make to publish what they wrote, when the request offers it.
	RemotePutTool = "remote_put"
	// FaultHTTP500AfterCommit answers HTTP 500 with an error body to the PUT
	// that committed the effect of a remote_put call which this server's
	// reply issued to the fault's member at the fault's turn: the effect
	// committed and its receipt exists, but the caller never learns it. A
	// repeated PUT of that key gets the receipt (200). PUTs of keys this
	// server did not issue a call for are never faulted.
	FaultHTTP500AfterCommit = "http_500_after_commit"
	// FaultHangAfterCommit commits the PUT of a remote_put call issued at the
	// fault's turn, then never answers: the response is held until the client
	// gives up or goes away (a process killed between intent and outcome, or
	// a timeout that leaves the effect unknown).
	FaultHangAfterCommit = "hang_after_commit"
	// MaxEffectBodyBytes bounds a PUT body (1 MiB); a larger one is 400.
	MaxEffectBodyBytes = 1 << 20
	// MaxEffectKeyBytes bounds an idempotency key (bytes); a longer one is 400.
	MaxEffectKeyBytes = 512
	// effectsSchemaVersion is the effects database's PRAGMA user_version.
	effectsSchemaVersion = 1
)

// ErrNoEffectsDB is returned (wrapped, naming the path) by OpenEffectsReader
// when there is no effects database at the path; it also matches
// fs.ErrNotExist.
var ErrNoEffectsDB = fmt.Errorf("no effects database: %w", fs.ErrNotExist)

// ErrNotEffectsDB is returned (wrapped) for a file that is not an effects
// database of this version: another SQLite file, or not SQLite at all.
var ErrNotEffectsDB = errors.New("not a reference effects database")

// EffectReceipt is the effect service's receipt, as GET and PUT answer it
// (JSON) and as the database keeps it.
type EffectReceipt struct {
	// IdempotencyKey is the effect's key, as PUT in the path.
	IdempotencyKey string `json:"idempotency_key"`
	// Committed is always true: the service records a receipt only for an
	// effect it committed.
	Committed bool `json:"committed"`
	// Reference is the service's id of the commit: "ref-" followed by the
	// first 16 hex digits of SHA-256(key + "\n" + PayloadSHA256).
	Reference string `json:"reference"`
	// Time is when the commit happened (UTC, wall clock of the serving
	// process).
	Time time.Time `json:"time"`
	// Puts counts the PUTs the service received for the key with a well-formed
	// body, the committing one included: 1 means nothing was sent twice.
	Puts int64 `json:"puts"`
	// Name is the name the value was committed under.
	Name string `json:"name"`
	// PayloadSHA256 is the SHA-256 hex of the committed body's RFC 8785
	// canonical JSON {"name":...,"value":...}: equal to the payload hash the
	// tool boundary records in the effect's intent.
	PayloadSHA256 string `json:"payload_sha256"`
}

// Receipt returns the receipt as effect.Receipt, the form reconciliation
// applies.
func (r EffectReceipt) Receipt() effect.Receipt {
	return effect.Receipt{IdempotencyKey: r.IdempotencyKey, Committed: r.Committed, Reference: r.Reference, Time: r.Time,
		PayloadSHA256: r.PayloadSHA256}
}

// remotePutArgs is a PUT body and the arguments of a remote_put call.
type remotePutArgs struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// payloadSHA256 is the SHA-256 hex of the body's RFC 8785 canonical JSON: the payload hash the
// tool boundary records for the same arguments, so a receipt can be matched to its intent.
func (a remotePutArgs) payloadSHA256() string {
	canon, err := jcs.Transform(compactJSON(a))
	if err != nil {
		// compactJSON of two strings is always valid JSON; keep the compact form if it were not.
		canon = compactJSON(a)
	}
	sum := sha256.Sum256(canon)
	return hex.EncodeToString(sum[:])
}

// effects returns the server's effects database, opening it on first use.
func (s *Server) effects(ctx context.Context) (*effectStore, error) {
	s.effMu.Lock()
	defer s.effMu.Unlock()
	if s.closed {
		return nil, errors.New("reference: server closed")
	}
	if s.eff == nil {
		st, err := openEffectStore(ctx, s.effectsPath)
		if err != nil {
			return nil, err
		}
		s.eff = st
	}
	return s.eff, nil
}

// Close releases the server's effects database. Requests after Close that
// need it are answered 500. It is safe to call more than once.
func (s *Server) Close() error {
	s.effMu.Lock()
	defer s.effMu.Unlock()
	s.closed = true
	if s.eff == nil {
		return nil
	}
	err := s.eff.close()
	s.eff = nil
	return err
}

// issuedCall is where a remote_put call this server's reply made came from.
type issuedCall struct {
	session string
	turn    int
}

// recordIssued remembers the remote_put calls of a reply, for
// FaultHTTP500AfterCommit.
func (s *Server) recordIssued(rep reply, session string, turn int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, tc := range rep.toolCalls {
		if tc.name == RemotePutTool {
			s.issued[tc.id] = issuedCall{session: session, turn: turn}
		}
	}
}

// issuedFor finds the issued call an idempotency key belongs to: the key's
// last ":"-separated part ends with the call id the reply gave ("call_...";
// the runtime may prefix it, e.g. "r1-call_...").
func (s *Server) issuedFor(key string) (issuedCall, bool) {
	part := key[strings.LastIndex(key, ":")+1:]
	i := strings.LastIndex(part, "call_")
	if i < 0 {
		return issuedCall{}, false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	c, ok := s.issued[part[i:]]
	return c, ok
}

// checkEffectKey refuses a key that is empty, too long, not UTF-8 or holds
// control characters.
func checkEffectKey(key string) error {
	switch {
	case key == "":
		return errors.New("the idempotency key in the path is empty")
	case len(key) > MaxEffectKeyBytes:
		return fmt.Errorf("the idempotency key is %d bytes, limit %d", len(key), MaxEffectKeyBytes)
	case !utf8.ValidString(key):
		return errors.New("the idempotency key is not UTF-8")
	case strings.ContainsFunc(key, unicode.IsControl):
		return errors.New("the idempotency key holds control characters")
	}
	return nil
}

// decodePutBody reads {"name","value"} exactly: both strings, name not empty,
// nothing else.
func decodePutBody(r io.Reader) (remotePutArgs, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return remotePutArgs{}, fmt.Errorf("body exceeds %d bytes", MaxEffectBodyBytes)
		}
		return remotePutArgs{}, fmt.Errorf("reading body: %w", err)
	}
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil {
		return remotePutArgs{}, fmt.Errorf("body is not a JSON object: %w", err)
	}
	for k := range fields {
		if k != "name" && k != "value" {
			return remotePutArgs{}, fmt.Errorf("unknown field %q (want name and value)", k)
		}
	}
	var a remotePutArgs
	for _, f := range []struct {
		key string
		dst *string
	}{{"name", &a.Name}, {"value", &a.Value}} {
		v, ok := fields[f.key]
		if !ok {
			return remotePutArgs{}, fmt.Errorf("missing field %q", f.key)
		}
		if err := json.Unmarshal(v, f.dst); err != nil {
			return remotePutArgs{}, fmt.Errorf("field %q is not a string", f.key)
		}
	}
	if strings.TrimSpace(a.Name) == "" {
		return remotePutArgs{}, errors.New(`field "name" is empty`)
	}
	return a, nil
}

func (s *Server) putEffect(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := checkEffectKey(key); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "key", "invalid_idempotency_key", err.Error())
		return
	}
	if h := r.Header.Get("Idempotency-Key"); h != "" && h != key {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "Idempotency-Key", "idempotency_key_mismatch",
			fmt.Sprintf("the Idempotency-Key header %q does not match the key in the path %q", h, key))
		return
	}
	args, err := decodePutBody(http.MaxBytesReader(w, r.Body, MaxEffectBodyBytes))
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "", "invalid_body", err.Error())
		return
	}
	// The body arrived whole: the commit no longer depends on the client
	// staying, as with any backend.
	ctx := context.WithoutCancel(r.Context())
	st, err := s.effects(ctx)
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "effects_unavailable", err.Error())
		return
	}
	res, err := st.put(ctx, key, args, time.Now())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "effects_unavailable", err.Error())
		return
	}
	switch {
	case res.conflict:
		writeError(w, http.StatusUnprocessableEntity, "invalid_request_error", "key", "idempotency_key_reused",
			fmt.Sprintf("idempotency key %q was committed with another payload (sha256 %s); nothing was committed", key, res.receipt.PayloadSHA256))
	case res.created:
		if c, ok := s.issuedFor(key); ok && s.faulted(FaultHangAfterCommit, c.session, c.turn) {
			<-r.Context().Done() // committed; the answer never comes
			return
		}
		if c, ok := s.issuedFor(key); ok && s.faulted(FaultHTTP500AfterCommit, c.session, c.turn) {
			writeError(w, http.StatusInternalServerError, "server_error", "", "reference_fault_http_500_after_commit",
				fmt.Sprintf("scripted fault %s for session %q turn %d", FaultHTTP500AfterCommit, c.session, c.turn))
			return
		}
		writeReceipt(w, http.StatusCreated, res.receipt)
	default:
		writeReceipt(w, http.StatusOK, res.receipt)
	}
}

func (s *Server) getEffect(w http.ResponseWriter, r *http.Request) {
	key := r.PathValue("key")
	if err := checkEffectKey(key); err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "key", "invalid_idempotency_key", err.Error())
		return
	}
	st, err := s.effects(r.Context())
	if err != nil {
		writeError(w, http.StatusInternalServerError, "server_error", "", "effects_unavailable", err.Error())
		return
	}
	rc, found, err := receiptOf(r.Context(), st.db, st.path, key)
	switch {
	case err != nil:
		writeError(w, http.StatusInternalServerError, "server_error", "", "effects_unavailable", err.Error())
	case !found:
		writeError(w, http.StatusNotFound, "invalid_request_error", "key", "receipt_not_found",
			fmt.Sprintf("no receipt for idempotency key %q: nothing was committed under it", key))
	default:
		writeReceipt(w, http.StatusOK, rc)
	}
}

func writeReceipt(w http.ResponseWriter, status int, rc EffectReceipt) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(compactJSON(rc))
}

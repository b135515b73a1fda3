// Package harness runs the formation matrix: it resolves the provider (the embedded reference
// provider by default), puts the observing gateway in front of it, runs each case (formation x task
// profile x language) as a run in the evidence store, checks the case independently of what any
// member said, and finalizes the run with its acceptance verdict. DESIGN.md, "The main job's data
// flow", is the contract.
package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"github.com/gowebpki/jcs"
	"golang.org/x/net/http/httpguts"
	"golang.org/x/sync/errgroup"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/evidence/attest"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/harness/replay/tolerance"
	"github.com/assay-audit/assay/internal/redactjson"
	"github.com/assay-audit/assay/internal/runid"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
)

// Options configures a matrix run.
type Options struct {
	// OutDir is the output directory (evidence.duckdb, gateway-usage.db, cases/, reports).
	OutDir string
	// Formations are the catalog names to run, in order (see Catalog: the twelve formations and
	// parallel+vote, parallel+judge, parallel+synthesizer; the bare mode names vote, judge and
	// synthesizer also select those), or the single name "all" for the whole catalog.
	Formations []string
	// Profile is the task profile name (default "standard"; see Profiles).
	Profile string
	// Language is the artifact language (default "go"; see Languages()).
	Language string
	// Concurrency is how many cases run at once (default 1). Cases are independent runs; each is
	// finalized on its own.
	Concurrency int
	// BaseURL is an OpenAI-compatible endpoint ("https://host/v1"); "" starts the embedded reference provider.
	BaseURL string
	// Model is the model id; required with BaseURL, default reference.ModelID without.
	Model string
	// APIKey is sent to the provider; it is never recorded. It needs BaseURL (the embedded
	// reference provider takes no key). When it is empty and APIKeyEnv is set, Normalize reads it
	// from that environment variable.
	APIKey string
	// SessionHeader carries each member's session id (default "X-Session-Id").
	SessionHeader string
	// Stream asks for SSE streaming responses.
	Stream bool
	// Tenant is recorded in every run's envelope (default "local").
	Tenant string
	// RequestTimeout bounds one provider request (default 60s).
	RequestTimeout time.Duration
	// TestDeadline bounds the independent test runner per member directory (default 120s).
	TestDeadline time.Duration
	// ReferenceFaults are injected into the embedded reference provider (tests and demonstrations).
	ReferenceFaults []reference.Fault
	// ToolVersion is assay's version, part of the environment fingerprint.
	ToolVersion string
	// Command is recorded as the evidence store's lock holder (e.g. "assay matrix run").
	Command string
	// StoreWait is how long to wait for the evidence store's writer lock held by another process;
	// 0 fails at once, naming the holder.
	StoreWait time.Duration
	// Progress receives one line per case step; nil for none. Lines are written whole, one at a
	// time, even when cases run concurrently. Every line passes the run's redaction projection.
	Progress io.Writer

	// PolicyFile is a policy file (YAML or JSON, policy.LoadFile) deciding every tool call of every
	// case; "" runs with the built-in allow-within-allowed-tools policy. The SHA-256 of its bytes is
	// every run's envelope policy digest ("" without a file).
	PolicyFile string
	// ApprovalsFile is an approval file (policy.LoadApprovalFile) whose grants are preloaded into
	// every case's boundary: a call policy sends to an approver runs only when an entry binds it
	// exactly (docs/safety.md, "Approvals"); otherwise the member fails as paused for approval.
	ApprovalsFile string
	// Mode is the run mode: "live" (default), "dry_run" (tools that are not readonly are simulated)
	// or "observe" (asks are recorded, not enforced). It is the envelope's mode; a run that is not
	// live is finalized non_certifiable by the evidence store, never accepted.
	Mode string
	// MemberToolCalls and TeamToolCalls are hard limits on tool calls dispatched through the
	// boundary, per member over a whole case and per case's team, reserved atomically before each
	// dispatch, retries and reconciliation lookups included (policy.Budget). 0 means the defaults
	// DefaultMemberToolCalls and DefaultTeamToolCalls; negative values are refused. A call over a
	// limit is refused before dispatch and recorded as such.
	MemberToolCalls int64
	TeamToolCalls   int64
	// MemberTokens and TeamTokens are hard limits on provider tokens (total_tokens as responses
	// reported them), per member over a whole case and per case's team, on the same policy.Budget
	// as the tool-call limits. 0 means no limit; negative values are refused. Before each provider
	// request the member reserves on the budget (policy.Budget.ReserveRequest): a request is
	// refused once the tokens so far reach a limit, or when a limit is set and earlier usage is
	// unknown (a response without usage, a retried request); the member then fails naming the
	// budget (a budget_refused event) and nothing is sent.
	MemberTokens int64
	TeamTokens   int64
	// APIKeyEnv names the environment variable that holds APIKey (Normalize reads it when APIKey is
	// empty; the variable must then be set and not empty); its value, APIKey itself and the values
	// of secret-looking environment variables (policy.SecretsFromEnv) are masked in every event
	// payload, artifact, check detail and progress line.
	APIKeyEnv string

	// ModelAliases maps a requested model id to another id that may answer for it (routing accepts
	// it and shows it); a dated snapshot of the requested id (gpt-4o-mini-2024-07-18 for
	// gpt-4o-mini) needs no alias.
	ModelAliases map[string]string

	// Signer, when set, signs each run right after it is finalized (and each interrupted run the
	// matrix's store session seals) as an in-toto attestation written to AttestDir (default
	// OUT/attestations): evidence/attest.SignRun.
	Signer    *attest.Signer
	AttestDir string
	// ReplayTolerance names the replay tolerance policy bound in every run's envelope before it
	// executes (harness/replay/tolerance: "exact", the default, or "volatile"); a replay compares
	// under it and no other (docs/replay.md).
	ReplayTolerance string

	// hooks stand, in harness tests, for a defective runtime; nil otherwise.
	hooks *testHooks

	// Filled by Normalize from PolicyFile and ApprovalsFile.
	policyFile   *policy.File
	policyDigest string
	approvals    *policy.ApprovalFile
}

// Default tool-call budgets (Options.MemberToolCalls, Options.TeamToolCalls). The reference
// provider's members call one or two tools per invocation; these leave room for real models and
// iterating formations while bounding a runaway member.
const (
	DefaultMemberToolCalls int64 = 200
	DefaultTeamToolCalls   int64 = 2000
)

// CaseResult is one case's outcome as finalized in the evidence store.
type CaseResult struct {
	RunID string `json:"run_id"`
	Case  string `json:"case"`
	// Catalog is the catalog entry's name (e.g. "parallel+vote"); Formation the registry formation.
	Catalog   string `json:"catalog"`
	Formation string `json:"formation"`
	Profile   string `json:"profile"`
	Language  string `json:"language"`
	Members   int    `json:"members"`
	// ElapsedSeconds is the case's wall time, seconds.
	ElapsedSeconds float64 `json:"elapsed_seconds"`
	// Timings splits ElapsedSeconds, in seconds: "team" (the formation run: orchestration, provider
	// exchanges through the gateway, tool calls, event recording), "check:<name>" per check, and
	// "finalize".
	Timings      map[string]float64 `json:"timings"`
	Checks       []evidence.Check   `json:"checks"`
	Verdict      evidence.Verdict   `json:"verdict"`
	EventCount   int64              `json:"event_count"`
	TerminalHash string             `json:"terminal_hash"`
	// Paused is set when the run paused (a call awaiting approval, an effect awaiting
	// reconciliation): it is rejected, and 'assay resume RUN' continues it.
	Paused bool `json:"paused,omitempty"`
	// Resumes is the run this one resumed ("" for a first run).
	Resumes string `json:"resumes,omitempty"`
}

// Summary is the outcome of a matrix run.
type Summary struct {
	Provider string `json:"provider"`
	// Reference is true when results were obtained with the embedded reference provider (not a
	// language model); every report says so.
	Reference bool         `json:"reference"`
	Model     string       `json:"model"`
	OutDir    string       `json:"out_dir"`
	StorePath string       `json:"store_path"`
	GatewayDB string       `json:"gateway_db"`
	Cases     []CaseResult `json:"cases"`
	// Sealed are the runs an earlier process left unfinished (interrupted) that this one's store
	// session sealed: finalized rejected, reason "interrupted" (evidence.Store.Recovered).
	Sealed []string `json:"sealed,omitempty"`
	// ReferenceHandlerSeconds is the time the embedded reference provider spent answering, summed
	// over requests (0 with --base-url): the stand-in model's share of the wall time, not assay's.
	ReferenceHandlerSeconds float64 `json:"reference_handler_seconds,omitempty"`
}

// Accepted reports whether every case was accepted.
func (s Summary) Accepted() bool {
	if len(s.Cases) == 0 {
		return false
	}
	for _, c := range s.Cases {
		if c.Verdict.Verdict != evidence.VerdictAccepted {
			return false
		}
	}
	return true
}

// Normalize fills defaults and validates the options, reading nothing but OutDir's file type, the
// policy and approval files and the environment variable APIKeyEnv names. It is separate from Run
// so a command can refuse bad input before anything is written. Zero values mean the defaults
// documented on each field; it is the only place options are validated.
//
// Errors: ErrBadOptions wrapping an *OptionError that names the field (by its Go name) and why.
func (o *Options) Normalize() error {
	if o.OutDir == "" {
		o.OutDir = "assay-out"
	}
	if fi, err := os.Stat(o.OutDir); err == nil && !fi.IsDir() {
		return optionErr("OutDir", "%s is a file, not a directory", o.OutDir)
	}
	if len(o.Formations) == 0 {
		o.Formations = []string{"sequential", "parallel"}
	}
	if len(o.Formations) == 1 && o.Formations[0] == "all" {
		o.Formations = CatalogNames()
	}
	seen := map[string]bool{}
	for i, f := range o.Formations {
		e, err := LookupCase(f)
		if err != nil {
			return err
		}
		if seen[e.Name] {
			return optionErr("Formations", "lists case %q twice", e.Name)
		}
		seen[e.Name] = true
		o.Formations[i] = e.Name
	}
	if o.Profile == "" {
		o.Profile = "standard"
	}
	if _, ok := Profiles()[o.Profile]; !ok {
		return optionErr("Profile", "%q is unknown (known: %s)", o.Profile, strings.Join(ProfileNames(), ", "))
	}
	if o.Language == "" {
		o.Language = "go"
	}
	if !slices.Contains(Languages(), o.Language) {
		return optionErr("Language", "%q is unknown (known: %s)", o.Language, strings.Join(Languages(), ", "))
	}
	if o.Concurrency < 0 {
		return optionErr("Concurrency", "%d is negative (0 means 1)", o.Concurrency)
	}
	if o.Concurrency == 0 {
		o.Concurrency = 1
	}
	if o.BaseURL != "" {
		u, err := url.Parse(o.BaseURL)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
			return optionErr("BaseURL", "%q is not an http(s) URL", o.BaseURL)
		}
		if o.Model == "" {
			return optionErrRelated("Model", []string{"BaseURL"}, "is required with BaseURL")
		}
	} else if o.Model == "" {
		o.Model = reference.ModelID
	}
	for req, ans := range o.ModelAliases {
		if req == "" || ans == "" || req == ans {
			return optionErr("ModelAliases", "%q=%q: both ids are required and must differ", req, ans)
		}
	}
	if err := o.resolveAPIKey(); err != nil {
		return err
	}
	if _, err := reference.New(reference.Config{Faults: o.ReferenceFaults}); err != nil {
		return optionErr("ReferenceFaults", "are invalid: %v", err)
	}
	if err := o.checkFaultsTarget(); err != nil {
		return err
	}
	if o.SessionHeader == "" {
		o.SessionHeader = "X-Session-Id"
	}
	if err := checkSessionHeader(o.SessionHeader); err != nil {
		return err
	}
	if o.Tenant == "" {
		o.Tenant = "local"
	}
	if o.RequestTimeout < 0 {
		return optionErr("RequestTimeout", "%s is negative (0 means 60s)", o.RequestTimeout)
	}
	if o.StoreWait < 0 {
		return optionErr("StoreWait", "%s is negative (0 means not to wait)", o.StoreWait)
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = 60 * time.Second
	}
	if o.TestDeadline <= 0 {
		o.TestDeadline = 120 * time.Second
	}
	if o.Command == "" {
		o.Command = "assay matrix run"
	}
	switch o.Mode {
	case "":
		o.Mode = string(tool.Live)
	case string(tool.Live), string(tool.DryRun), string(tool.Observe):
	default:
		return optionErr("Mode", "%q is not one of %s, %s, %s", o.Mode, tool.Live, tool.DryRun, tool.Observe)
	}
	for _, b := range []struct {
		field string
		n     int64
		zero  string
	}{
		{"MemberToolCalls", o.MemberToolCalls, fmt.Sprintf("the default, %d", DefaultMemberToolCalls)},
		{"TeamToolCalls", o.TeamToolCalls, fmt.Sprintf("the default, %d", DefaultTeamToolCalls)},
		{"MemberTokens", o.MemberTokens, "no limit"},
		{"TeamTokens", o.TeamTokens, "no limit"},
	} {
		if b.n < 0 {
			return optionErr(b.field, "%d is negative (0 means %s)", b.n, b.zero)
		}
	}
	if o.MemberToolCalls == 0 {
		o.MemberToolCalls = DefaultMemberToolCalls
	}
	if o.TeamToolCalls == 0 {
		o.TeamToolCalls = DefaultTeamToolCalls
	}
	if o.ReplayTolerance == "" {
		o.ReplayTolerance = tolerance.Exact.Name
	}
	if _, err := tolerance.Lookup(o.ReplayTolerance); err != nil {
		return fmt.Errorf("%w: --replay-tolerance: %v", ErrBadOptions, err)
	}
	o.policyFile, o.policyDigest, o.approvals = nil, "", nil
	if o.PolicyFile != "" {
		f, digest, err := policy.LoadFile(o.PolicyFile)
		if err != nil {
			return optionErr("PolicyFile", "%s: %s", o.PolicyFile, oneLine(err.Error()))
		}
		if err := checkPolicyTools(f); err != nil {
			return optionErr("PolicyFile", "%s: %v", o.PolicyFile, err)
		}
		o.policyFile, o.policyDigest = f, digest
	}
	if o.ApprovalsFile != "" {
		f, err := policy.LoadApprovalFile(o.ApprovalsFile)
		if err != nil {
			return optionErr("ApprovalsFile", "%s: %s", o.ApprovalsFile, oneLine(err.Error()))
		}
		o.approvals = f
	}
	return nil
}

// resolveAPIKey reads APIKey from the variable APIKeyEnv names when it is not given, and refuses a
// key (or a variable naming one) without BaseURL: the embedded reference provider takes none, and a
// key that is never sent would suggest a provider that was never asked.
func (o *Options) resolveAPIKey() error {
	if o.BaseURL == "" && (o.APIKey != "" || o.APIKeyEnv != "") {
		field := "APIKey"
		if o.APIKeyEnv != "" {
			field = "APIKeyEnv"
		}
		return optionErrRelated(field, []string{"BaseURL"}, "needs BaseURL: the embedded reference provider takes no key")
	}
	if o.APIKey != "" || o.APIKeyEnv == "" {
		return nil
	}
	key, ok := os.LookupEnv(o.APIKeyEnv)
	if !ok || key == "" {
		return optionErr("APIKeyEnv", "names %s, which is not set (or is empty)", o.APIKeyEnv)
	}
	o.APIKey = key
	return nil
}

// checkPolicyTools refuses a rule whose tool pattern matches no tool the runtime has: a mistyped
// name (WRITE_FILE, writefile) in a deny rule would otherwise never apply and leave the policy
// more permissive than its author wrote.
func checkPolicyTools(f *policy.File) error {
	names := slices.Sorted(maps.Keys(knownTools()))
	for _, r := range f.Rules {
		for _, pat := range r.Tools {
			matched := false
			for _, n := range names {
				if ok, err := doublestar.Match(pat, n); err == nil && ok {
					matched = true
					break
				}
			}
			if !matched {
				return fmt.Errorf("rule %s: tool pattern %q matches no tool (tools: %s)", r.ID, pat, strings.Join(names, ", "))
			}
		}
	}
	return nil
}

// PolicyDigest returns the SHA-256 hex of the policy file Normalize loaded, "" without one.
func (o *Options) PolicyDigest() string { return o.policyDigest }

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// newRedactor returns the run's one redaction projection: the API key, the value of the variable
// APIKeyEnv names and every secret-looking environment variable, each also in its JSON-escaped
// form (so a value inside a raw JSON body is found too).
func newRedactor(o Options, environ []string) *policy.Redactor {
	secrets := policy.SecretsFromEnv(environ, o.APIKeyEnv)
	if o.APIKey != "" {
		secrets = append(secrets, o.APIKey)
	}
	for _, v := range slices.Clone(secrets) {
		if b, err := json.Marshal(v); err == nil {
			if esc := string(b[1 : len(b)-1]); esc != v {
				secrets = append(secrets, esc)
			}
		}
	}
	return policy.NewRedactor(secrets...)
}

// credentialHeaders are headers that carry credentials: the session header must not be one of them,
// or the gateway, which records the session header's value, would record a credential.
var credentialHeaders = []string{"Authorization", "Proxy-Authorization", "Cookie", "Set-Cookie", "X-Api-Key",
	"Api-Key", "Openai-Organization", "Openai-Project", "X-Goog-Api-Key", "Anthropic-Api-Key"}

// checkSessionHeader refuses a session header that is not an RFC 9110 token, that HTTP itself
// manages, or that carries credentials.
func checkSessionHeader(h string) error {
	if !httpguts.ValidHeaderFieldName(h) {
		return optionErr("SessionHeader", "%q is not a valid HTTP header name", h)
	}
	canon := http.CanonicalHeaderKey(h)
	if slices.Contains(credentialHeaders, canon) {
		return optionErr("SessionHeader", "%s carries credentials; the gateway records the session header's value, so pick another name", canon)
	}
	switch canon {
	case "Content-Length", "Content-Type", "Host", "Transfer-Encoding", "Connection", "Te", "Trailer", "Upgrade", "Accept-Encoding", "Content-Encoding":
		return optionErr("SessionHeader", "%s is managed by HTTP itself; pick a header of your own such as X-Session-Id", canon)
	}
	return nil
}

// checkFaultsTarget refuses a reference fault whose member is in none of the selected cases: it
// would never fire, and the run would look like a fault that changed nothing.
func (o *Options) checkFaultsTarget() error {
	if len(o.ReferenceFaults) == 0 {
		return nil
	}
	if o.BaseURL != "" {
		return optionErrRelated("ReferenceFaults", []string{"BaseURL"}, "apply only to the embedded reference provider, not with BaseURL")
	}
	members := map[string]bool{}
	for _, name := range o.Formations {
		e, err := LookupCase(name)
		if err != nil {
			return err
		}
		for _, m := range e.Members {
			members[m.ID] = true
		}
	}
	for _, f := range o.ReferenceFaults {
		if f.Member != "" && !members[f.Member] {
			known := make([]string, 0, len(members))
			for m := range members {
				known = append(known, m)
			}
			slices.Sort(known)
			return optionErr("ReferenceFaults", "name member %q, which no selected case has (members: %s)", f.Member, strings.Join(known, ", "))
		}
	}
	return o.checkEffectFaults()
}

// preflight asks the provider for its models (GET {base}/models, OpenAI's list-models endpoint)
// directly, not through the gateway, so that nothing of a run is recorded. An unreachable
// provider, a refused key, an error status, or a model list that lacks the requested model is an
// error; a provider without the endpoint (404, 405, 501) is given the benefit of the doubt, since
// the cases themselves then show what it serves.
func preflight(ctx context.Context, o Options) error {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimRight(o.BaseURL, "/")+"/models", nil)
	if err != nil {
		return fmt.Errorf("provider %s: %v", o.BaseURL, err)
	}
	if o.APIKey != "" {
		req.Header.Set("Authorization", "Bearer "+o.APIKey)
	}
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		return fmt.Errorf("provider %s is unreachable: %v", o.BaseURL, errors.Unwrap(err))
	}
	defer resp.Body.Close()
	switch {
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return optionErr("APIKey", "was refused by provider %s (status %d to GET /models): check it", o.BaseURL, resp.StatusCode)
	case resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed || resp.StatusCode == http.StatusNotImplemented:
		return nil
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("provider %s answered GET /models with status %d; is it OpenAI-compatible?", o.BaseURL, resp.StatusCode)
	}
	var list struct {
		Data []struct {
			ID string `json:"id"`
		} `json:"data"`
	}
	if err := json.NewDecoder(io.LimitReader(resp.Body, 8<<20)).Decode(&list); err != nil || list.Data == nil {
		return fmt.Errorf("provider %s answered GET /models with something that is not an OpenAI model list; is it OpenAI-compatible?", o.BaseURL)
	}
	var ids []string
	for _, m := range list.Data {
		if m.ID == o.Model {
			return nil
		}
		ids = append(ids, m.ID)
	}
	if len(ids) > 10 {
		ids = append(ids[:10], "...")
	}
	return fmt.Errorf("provider %s does not list model %q (it lists: %s)", o.BaseURL, o.Model, strings.Join(ids, ", "))
}

// Run runs the matrix and returns its summary. Every case is finalized in the evidence store,
// accepted or rejected; a failed case is never re-run. Errors are for what stopped the matrix
// itself (bad options, the store locked by another process — evidence.ErrLocked —, a provider or
// gateway that could not start); a rejected case is not an error.
func Run(ctx context.Context, opts Options) (Summary, error) {
	if err := opts.Normalize(); err != nil {
		return Summary{}, err
	}
	if opts.BaseURL != "" {
		// Before anything is written: an unreachable provider or an unserved model is bad input,
		// not a matrix of rejected cases.
		if err := preflight(ctx, opts); errors.Is(err, ErrBadOptions) {
			return Summary{}, err
		} else if err != nil {
			return Summary{}, fmt.Errorf("%w: %v", ErrBadOptions, err)
		}
	}
	if err := os.MkdirAll(opts.OutDir, 0o755); err != nil {
		return Summary{}, fmt.Errorf("create output directory: %w", err)
	}
	storePath := filepath.Join(opts.OutDir, "evidence.duckdb")
	store, err := evidence.Open(ctx, storePath, evidence.OpenOptions{Command: opts.Command, Wait: opts.StoreWait})
	if err != nil {
		return Summary{}, err
	}
	defer store.Close()

	sum := Summary{Model: opts.Model, OutDir: opts.OutDir, StorePath: storePath,
		GatewayDB: filepath.Join(opts.OutDir, "gateway-usage.db")}
	env, closeEnv, err := openEnv(ctx, opts, store, &sum)
	if err != nil {
		return sum, err
	}
	defer closeEnv()
	refServer, prog := env.reference, env.progress
	profile := Profiles()[opts.Profile]
	if opts.PolicyFile != "" || opts.Mode != string(tool.Live) || opts.ApprovalsFile != "" {
		prog.line("mode %s, policy %s (sha256 %s), approvals %s", opts.Mode, labelOr(opts.PolicyFile, "built-in"),
			labelOr(opts.policyDigest, "none"), labelOr(opts.ApprovalsFile, "none"))
	}
	cases := make([]Case, len(opts.Formations))
	for i, name := range opts.Formations {
		entry, _ := LookupCase(name) // Normalize resolved every name
		cases[i] = Case{Entry: entry, Profile: profile, Language: opts.Language}
	}
	results := make([]CaseResult, len(cases))
	errs := make([]error, len(cases))
	// Cases start in order, opts.Concurrency at a time; none starts once ctx is done. Each keeps
	// its own error, so the one returned is the first in case order, not in time.
	var g errgroup.Group
	g.SetLimit(opts.Concurrency)
	for i, c := range cases {
		g.Go(func() error {
			if ctx.Err() != nil {
				return nil
			}
			prog.line("case %d/%d %s: running", i+1, len(cases), c.Name())
			cr, err := runCase(ctx, opts, c, env)
			if err != nil {
				errs[i] = fmt.Errorf("case %s: %w", c.Name(), err)
				prog.line("case %d/%d %s: stopped: %v", i+1, len(cases), c.Name(), err)
				return nil
			}
			prog.line("case %d/%d %s: %s in %.1fs (run %s)", i+1, len(cases), c.Name(), cr.Verdict.Verdict, cr.ElapsedSeconds, cr.RunID)
			results[i] = cr
			return nil
		})
	}
	_ = g.Wait() // every function returns nil
	if sum.Sealed = store.Recovered(); len(sum.Sealed) > 0 {
		prog.line("sealed %d interrupted run(s) an earlier process left unfinished, rejected as interrupted: %s", len(sum.Sealed), strings.Join(sum.Sealed, ", "))
	}
	if err := signRuns(ctx, opts, store, sum.Sealed...); err != nil {
		return sum, err
	}
	for i := range cases {
		if errs[i] != nil {
			return sum, errs[i]
		}
		if results[i].RunID != "" {
			sum.Cases = append(sum.Cases, results[i])
		}
	}
	if refServer != nil {
		sum.ReferenceHandlerSeconds = refServer.HandlerTime().Seconds()
	}
	if err := ctx.Err(); err != nil {
		return sum, fmt.Errorf("matrix cancelled after %d of %d cases: %w", len(sum.Cases), len(cases), err)
	}
	return sum, nil
}

// openEnv starts what every case of a matrix run shares: the embedded reference provider (when no
// base URL is given), the observing gateway on OUT/gateway-usage.db (which keeps the usage of
// earlier processes' requests, so a resumed run's sessions reconcile over both), the provider
// client, the redactor and the Python interpreters. sum receives the provider's description. The
// returned function stops what was started; it is also returned (and must be called) on error.
func openEnv(ctx context.Context, opts Options, store *evidence.Store, sum *Summary) (caseEnv, func(), error) {
	var closers []func()
	closeAll := func() {
		for i := len(closers) - 1; i >= 0; i-- {
			closers[i]()
		}
	}
	upstream := opts.BaseURL
	var refServer *reference.Server
	if upstream == "" {
		ref, err := reference.Start(ctx, reference.Config{Faults: opts.ReferenceFaults, SessionHeader: opts.SessionHeader,
			EffectsDB: EffectsDBPath(opts.OutDir)})
		if err != nil {
			return caseEnv{}, closeAll, fmt.Errorf("start the reference provider: %w", err)
		}
		closers = append(closers, func() { ref.Close() })
		refServer = ref.Server()
		upstream = ref.BaseURL()
		sum.Reference = true
		sum.Provider = "reference (embedded, " + reference.ModelID + ", not a language model)"
	} else {
		sum.Provider = opts.BaseURL
	}
	up, err := url.Parse(upstream)
	if err != nil {
		return caseEnv{}, closeAll, fmt.Errorf("provider URL %q: %w", upstream, err)
	}
	basePath := strings.TrimRight(up.Path, "/")
	up.Path, up.RawPath = "", ""
	gw, err := gateway.Start(ctx, gateway.Config{Upstream: up.String(), SessionHeader: opts.SessionHeader, DBPath: sum.GatewayDB})
	if err != nil {
		return caseEnv{}, closeAll, fmt.Errorf("start the observing gateway: %w", err)
	}
	closers = append(closers, func() { gw.Close() })
	client, err := provider.NewClient(provider.ClientConfig{BaseURL: gw.URL() + basePath, APIKey: opts.APIKey,
		SessionHeader: opts.SessionHeader, Timeout: opts.RequestTimeout})
	if err != nil {
		return caseEnv{}, closeAll, fmt.Errorf("provider client: %w", err)
	}
	env := caseEnv{store: store, gateway: gw, client: client, redactor: newRedactor(opts, os.Environ()), teams: newTeamRuns()}
	if opts.Language == reference.LanguagePython {
		// One interpreter for the whole matrix, chosen deliberately (oracle.FindPython); when none
		// qualifies the tests and oracle checks fail as unavailable, never pass.
		env.oraclePython, env.oraclePythonErr = oracle.FindPython(ctx, false)
		env.pytestPython, env.pytestPythonErr = oracle.FindPython(ctx, true)
	}
	env.progress = &lineWriter{w: opts.Progress, redactor: env.redactor}
	env.reference = refServer
	if env.effectsURL, err = startEffectService(ctx, opts, refServer != nil, upstream, &closers); err != nil {
		return caseEnv{}, closeAll, err
	}
	return env, closeAll, nil
}

// caseEnv is what every case of one matrix run shares.
type caseEnv struct {
	store           *evidence.Store
	gateway         *gateway.Gateway
	client          provider.Provider
	oraclePython    oracle.Python
	oraclePythonErr error
	pytestPython    oracle.Python
	pytestPythonErr error
	// redactor is the run's one redaction projection (newRedactor).
	redactor *policy.Redactor
	// progress receives progress lines (never nil; it may discard them).
	progress *lineWriter
	// reference is the embedded reference provider, nil with a base URL.
	reference *reference.Server
	// effectsURL is the base URL of the run's effect service (startEffectService), "" when none.
	effectsURL string
	// backend, when set, is the receipt lookup reconciliation asks instead of the effect service
	// (a replay serves the recorded receipts); nil otherwise.
	backend effect.Backend
	// teams are the team runs of this matrix run: their member sessions are the ones the gateway
	// may see.
	teams *teamRuns
}

// testHooks stand, in harness tests, for a defective runtime or a stray client: they change what
// the runtime records and returns, or send requests through the gateway while the team runs; they
// never touch the store.
type testHooks struct {
	// event rewrites each event the runtime emits before it is recorded.
	event func(runtime.Event) runtime.Event
	// result rewrites the team result the runtime returned.
	result func(*runtime.TeamResult)
	// duringTeam runs just before the team, with where the case's services are and its run id.
	duringTeam func(ctx context.Context, env hookEnv)
	// afterTeam runs when the team returned, before the evidence is read, with the gateway's
	// usage database path (a defective gateway's records).
	afterTeam func(ctx context.Context, gatewayDB string)
	// artifact rewrites an artifact the runtime stores (a runtime that keeps other bytes than it
	// received).
	artifact func(name string, data []byte) []byte
	// checks narrows the checks a test needs (the tests and oracle build member code).
	checks func([]Check) []Check
}

// hookEnv is what a duringTeam hook is told: the gateway's base URL, the effect service's ("" when
// none) and the case's run id.
type hookEnv struct{ gatewayURL, effectsURL, runID string }

func labelOr(s, empty string) string {
	if s == "" {
		return empty
	}
	return s
}

// lineWriter writes whole progress lines, one at a time, redacted.
type lineWriter struct {
	mu       sync.Mutex
	w        io.Writer
	redactor *policy.Redactor
}

func (l *lineWriter) line(format string, args ...any) {
	if l.w == nil {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	fmt.Fprintln(l.w, l.redactor.String(fmt.Sprintf(format, args...)))
}

// manifest is what a case's manifest digest covers: everything that defines the case before it runs.
type manifest struct {
	Catalog      string               `json:"catalog"`
	Formation    string               `json:"formation"`
	Options      map[string]any       `json:"options"`
	TeamTask     string               `json:"team_task"`
	Profile      string               `json:"profile"`
	Language     string               `json:"language"`
	Provider     string               `json:"provider"`
	Model        string               `json:"model"`
	Stream       bool                 `json:"stream"`
	Members      []runtime.MemberSpec `json:"members"`
	Deliverables map[string][]string  `json:"deliverables"`
	Checks       []string             `json:"checks"`
	OracleSpec   oracleManifest       `json:"oracle_spec"`
}

// oracleManifest is the part of an oracle spec that defines what it checks (the reference itself is
// code, identified by the spec's name and reference expression).
type oracleManifest struct {
	Name      string          `json:"name"`
	Language  string          `json:"language"`
	File      string          `json:"file"`
	Function  string          `json:"function"`
	Reference string          `json:"reference"`
	Domains   []oracle.Domain `json:"domains"`
	Imports   []string        `json:"imports,omitempty"`
	Checks    int             `json:"checks"`
}

func newOracleManifest(s oracle.Spec) oracleManifest {
	return oracleManifest{Name: s.Name, Language: s.Language, File: s.File, Function: s.Function,
		Reference: s.Reference.GoExpr, Domains: s.Domains, Imports: s.Imports, Checks: s.Expected()}
}

func runCase(ctx context.Context, opts Options, c Case, env caseEnv) (CaseResult, error) {
	start := time.Now()
	store := env.store
	runID := newRunID()
	cr, m, envelope, err := prepareCase(opts, c, runID, true)
	if err != nil {
		return CaseResult{}, err
	}
	// The envelope is bound before anything executes.
	if err := store.OpenRun(ctx, runID, envelope, ""); err != nil {
		return CaseResult{}, fmt.Errorf("open run %s: %w", runID, err)
	}
	cr.runID, cr.start = runID, start
	cr.sink = &storeSink{store: store, runID: runID, redactor: env.redactor}
	if opts.hooks != nil {
		cr.sink.hook, cr.sink.artifactHook = opts.hooks.event, opts.hooks.artifact
	}
	manifestJSON, err := json.MarshalIndent(m, "", "  ")
	if err != nil {
		return CaseResult{}, fmt.Errorf("run %s: manifest: %w", runID, err)
	}
	if _, err := store.PutArtifact(ctx, runID, manifestArtifact, "application/json", manifestJSON); err != nil {
		return CaseResult{}, fmt.Errorf("run %s: store manifest: %w", runID, err)
	}
	return executeCase(ctx, opts, c, env, cr)
}

// manifestArtifact is the name a case run's manifest is stored under.
const manifestArtifact = "manifest.json"

// prepareCase builds what defines case c for the team run identityRunID: the member directories
// under OUT/cases/identityRunID (created and scaffolded only with scaffold), the plans, the oracle
// spec, the team, the manifest and the envelope binding its digest. It writes no evidence.
func prepareCase(opts Options, c Case, identityRunID string, scaffold bool) (caseRun, manifest, evidence.Envelope, error) {
	caseDir, err := filepath.Abs(filepath.Join(opts.OutDir, "cases", identityRunID))
	if err != nil {
		return caseRun{}, manifest{}, evidence.Envelope{}, err
	}
	return prepareCaseIn(opts, c, identityRunID, caseDir, scaffold)
}

// prepareCaseIn is prepareCase with the members' directories under caseDir (a replay works in its
// own directories; nothing that defines the case depends on where they are).
func prepareCaseIn(opts Options, c Case, identityRunID, caseDir string, scaffold bool) (caseRun, manifest, evidence.Envelope, error) {
	plans, err := c.plan(caseDir, scaffold)
	if err != nil {
		return caseRun{}, manifest{}, evidence.Envelope{}, err
	}
	spec, err := c.oracleSpec()
	if err != nil {
		return caseRun{}, manifest{}, evidence.Envelope{}, fmt.Errorf("oracle spec: %w", err)
	}
	fopts := c.Entry.Options()
	task := c.Entry.Task
	if task == "" {
		task = defaultTeamTask
	}
	team := runtime.Team{RunID: identityRunID, Formation: c.Entry.Formation, Task: task}
	m := manifest{Catalog: c.Entry.Name, Formation: c.Entry.Formation, Options: fopts.Summary(), TeamTask: task,
		Profile: c.Profile.Name, Language: c.Language, Provider: upstreamLabel(opts),
		Model: opts.Model, Stream: opts.Stream, Deliverables: map[string][]string{}, OracleSpec: newOracleManifest(spec)}
	for _, p := range plans {
		team.Members = append(team.Members, p.Spec)
		spec := p.Spec
		spec.Dir = "" // directories are per-run locations, not part of what defines the case
		m.Members = append(m.Members, spec)
		m.Deliverables[p.Spec.ID] = p.Deliverables
	}
	for _, ch := range Checks() {
		m.Checks = append(m.Checks, ch.Name)
	}
	manifestDigest, err := digestJSON(m)
	if err != nil {
		return caseRun{}, manifest{}, evidence.Envelope{}, err
	}
	envelope := evidence.Envelope{
		Tenant: opts.Tenant, ManifestDigest: manifestDigest, Mode: opts.Mode, PolicyDigest: opts.policyDigest,
		EnvironmentFingerprint: environmentFingerprint(opts.ToolVersion),
		EntropySources:         []string{"provider_responses", "wall_clock", "run_id"},
		ReplayTolerance:        opts.ReplayTolerance,
		Provider:               upstreamLabel(opts), BaseURL: opts.BaseURL, Model: opts.Model,
		Formation: c.Entry.Formation, TaskProfile: c.Profile.Name, Language: c.Language,
	}
	return caseRun{caseDir: caseDir, plans: plans, spec: spec, team: team, fopts: fopts}, m, envelope, nil
}

// caseRun is one run of a case as executeCase needs it: the evidence run (already open, its
// envelope bound), the team and its plans, and for a resumed run what it resumes.
type caseRun struct {
	runID   string // the evidence run
	caseDir string
	plans   []memberPlan
	spec    oracle.Spec
	team    runtime.Team // team.RunID is the identity run id (the first run's, for a resumed run)
	fopts   formation.Options
	sink    *storeSink
	start   time.Time
	resume  *resumePoint
}

// executeCase runs an open case run to its verdict: the boundary and engine (durable when the
// formation can resume), for a resumed run the recovery of its journal, the team, the checks and
// finalization.
func executeCase(ctx context.Context, opts Options, c Case, env caseEnv, cr caseRun) (CaseResult, error) {
	start, runID, store, team, plans, spec, caseDir := cr.start, cr.runID, env.store, cr.team, cr.plans, cr.spec, cr.caseDir
	timings := map[string]float64{}
	engine, fopts, err := startTeam(ctx, opts, env, cr, caseTools(env, c.Entry))
	if err != nil {
		return CaseResult{}, err
	}
	gwFrom, windowFrom := env.gateway.Mark(), time.Now()
	env.teams.add(team, gwFrom)
	if opts.hooks != nil && opts.hooks.duringTeam != nil {
		opts.hooks.duringTeam(ctx, hookEnv{gatewayURL: env.gateway.URL(), effectsURL: env.effectsURL, runID: runID})
	}
	teamStart := time.Now()
	result, teamErr := runTeam(ctx, engine, team, fopts)
	teamEnd := time.Now()
	timings["team"] = teamEnd.Sub(teamStart).Seconds()

	gwTo := env.gateway.Mark()
	env.teams.close(team, gwTo)
	checkList := Checks()
	if h := opts.hooks; h != nil {
		if h.result != nil {
			h.result(&result)
		}
		if h.afterTeam != nil {
			h.afterTeam(ctx, filepath.Join(opts.OutDir, "gateway-usage.db"))
		}
		if h.checks != nil {
			checkList = h.checks(checkList)
		}
	}

	state := &caseState{runID: runID, caseDir: caseDir, model: opts.Model, team: team, plans: plans, result: result,
		teamErr: teamErr, gateway: env.gateway, store: store, testTime: opts.TestDeadline,
		oracle: oracle.Options{WorkDir: caseDir, Python: env.oraclePython}, entry: c.Entry, language: c.Language, spec: spec,
		oraclePythonErr: env.oraclePythonErr, pytestPython: env.pytestPython, pytestPythonErr: env.pytestPythonErr, redactor: env.redactor,
		mode: opts.Mode, modelAliases: opts.ModelAliases, reference: env.reference != nil, gwFrom: gwFrom, gwTo: gwTo, owned: env.teams.owns,
		ownsKey: env.teams.ownsKey, teamFrom: windowFrom, teamTo: teamEnd}
	if cr.resume != nil {
		state.priorRuns = cr.resume.lineage
	}
	prepStart := time.Now()
	if err := state.prepareEvidence(ctx); err != nil {
		return CaseResult{}, fmt.Errorf("run %s: %w", runID, err)
	}
	timings["evidence"] = time.Since(prepStart).Seconds()
	var checks []evidence.Check
	for _, o := range evaluateChecks(ctx, state, checkList, env.redactor) {
		timings["check:"+o.rec.Name] = o.seconds
		if err := store.RecordCheck(ctx, runID, o.rec); err != nil {
			return CaseResult{}, fmt.Errorf("run %s: record check %s: %w", runID, o.rec.Name, err)
		}
		_ = engine.Emit(ctx, "", "", o.event)
		checks = append(checks, o.rec)
	}
	verdict := caseVerdict(checks, engine, runID)
	paused, _ := engine.Paused()
	finStart := time.Now()
	if err := bindExternal(ctx, env, opts.OutDir, runID, team.RunID, gwFrom, gwTo); err != nil {
		return CaseResult{}, fmt.Errorf("run %s: %w", runID, err)
	}
	fin, err := store.Finalize(ctx, runID, verdict)
	if err != nil {
		return CaseResult{}, fmt.Errorf("finalize run %s: %w", runID, err)
	}
	if err := signRuns(ctx, opts, store, runID); err != nil {
		return CaseResult{}, err
	}
	timings["finalize"] = time.Since(finStart).Seconds()
	out := CaseResult{RunID: runID, Case: c.Name(), Catalog: c.Entry.Name, Formation: c.Entry.Formation, Profile: c.Profile.Name,
		Language: c.Language, Members: len(team.Members), ElapsedSeconds: time.Since(start).Seconds(), Timings: timings, Checks: checks,
		Verdict: fin.Verdict, EventCount: fin.EventCount, TerminalHash: fin.TerminalHash, Paused: paused}
	if cr.resume != nil {
		out.Resumes = cr.resume.from
	}
	return out, nil
}

// startTeam builds an open case run's boundary and engine — durable when the formation can resume,
// with tools as the engine's tools — records its boundary configuration and, for a resumed run,
// recovers its journal. It returns the engine and the formation options to run the team with.
// Matrix runs, resumes and replays (replay_api.go) all start a team through it.
func startTeam(ctx context.Context, opts Options, env caseEnv, cr caseRun, tools map[string]tool.Tool) (*runtime.Engine, formation.Options, error) {
	runID, team, fopts, sink := cr.runID, cr.team, cr.fopts, cr.sink
	bopts, grants, err := boundaryOptions(opts, team, env.redactor)
	if err != nil {
		return nil, fopts, fmt.Errorf("run %s: %w", runID, err)
	}
	ecfg := runtime.EngineConfig{Provider: env.client, Model: opts.Model, Stream: opts.Stream, Sink: sink,
		BoundaryOptions: append(bopts, caseBackendOptions(env)...), Tools: tools}
	if formation.Resumable(team.Formation, fopts) {
		ecfg.Durable = &runtime.DurableConfig{Checkpoint: sink.Checkpoint}
		if cr.resume != nil {
			ecfg.Durable.Restore, ecfg.Durable.Consumed = &cr.resume.state, cr.resume.consumed
			fopts.Resume = true
		}
	}
	engine, err := runtime.NewEngine(ecfg)
	if err != nil {
		return nil, fopts, err
	}
	if err := engine.Emit(ctx, "", "", event.BoundaryConfigured{Mode: opts.Mode, PolicyFile: opts.PolicyFile,
		PolicyDigest: opts.policyDigest, ApprovalsFile: opts.ApprovalsFile, ApprovalsPreloaded: grants,
		MemberToolCalls: opts.MemberToolCalls, TeamToolCalls: opts.TeamToolCalls,
		MemberTokens: opts.MemberTokens, TeamTokens: opts.TeamTokens}); err != nil {
		return nil, fopts, fmt.Errorf("run %s: record boundary configuration: %w", runID, err)
	}
	if cr.resume != nil {
		if err := cr.resume.recover(ctx, engine, team, env.progress); err != nil {
			return nil, fopts, fmt.Errorf("run %s: %w", runID, err)
		}
	}
	return engine, fopts, nil
}

// runTeam runs the team through the formation registry; a team that did not complete leaves a
// warning event saying why.
func runTeam(ctx context.Context, engine *runtime.Engine, team runtime.Team, fopts formation.Options) (runtime.TeamResult, error) {
	result, err := formation.RunWith(ctx, engine, team, fopts)
	if err != nil {
		_ = engine.Emit(ctx, "", "", event.Warning{Warning: "team did not complete: " + err.Error()})
	}
	return result, err
}

// checkOutcome is one check's result: the record for the store (detail and evidence redacted), the
// check_completed event, and its time in seconds.
type checkOutcome struct {
	rec     evidence.Check
	event   event.CheckCompleted
	seconds float64
}

// evaluateChecks runs the checks in order over the prepared case state and returns their results;
// it records nothing.
func evaluateChecks(ctx context.Context, state *caseState, checkList []Check, r *policy.Redactor) []checkOutcome {
	var out []checkOutcome
	for _, ch := range checkList {
		checkStart := time.Now()
		status, detail, ev := ch.safeRun(ctx, state)
		out = append(out, checkOutcome{seconds: time.Since(checkStart).Seconds(),
			rec: evidence.Check{Name: ch.Name, Required: ch.Required, Status: status, Detail: r.String(detail),
				Evidence: redactJSON(r, marshalEvidence(ev))},
			event: event.CheckCompleted{Check: ch.Name, Required: ch.Required, Status: status, Detail: detail}})
	}
	return out
}

// caseVerdict is the acceptance verdict a case run asks Finalize for: accepted when every required
// check passed, else rejected naming them; a paused run is never accepted, whatever its checks say
// (its work is not finished).
func caseVerdict(checks []evidence.Check, engine *runtime.Engine, runID string) evidence.Verdict {
	verdict := evidence.Verdict{Verdict: evidence.VerdictAccepted}
	if failed := failedRequired(checks); len(failed) > 0 {
		verdict = evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: failed}
	}
	if paused, pauses := engine.Paused(); paused {
		reasons := []string{fmt.Sprintf("paused: %s; continue it with 'assay resume %s'", strings.Join(pauses, "; "), runID)}
		verdict = evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: append(reasons, verdict.Reasons...)}
	}
	return verdict
}

// boundaryOptions builds one case's tool boundary configuration: its policy engine (from the
// policy file, else the built-in policy), an approval store with the approval file's grants
// preloaded for this run (it returns how many), the mode, the tool-call and token budgets of the
// case's team (one policy.Budget, which the runtime also reserves provider tokens from) and the
// run's redactor.
func boundaryOptions(opts Options, team runtime.Team, r *policy.Redactor) ([]tool.Option, int, error) {
	bopts := []tool.Option{tool.WithRedactor(r)}
	if opts.Mode != "" && opts.Mode != string(tool.Live) {
		bopts = append(bopts, tool.WithMode(tool.Mode(opts.Mode)))
	}
	if opts.policyFile != nil {
		bopts = append(bopts, tool.WithPolicy(policy.NewEngine(opts.policyDigest, 0, opts.policyFile.Policy(filepath.Base(opts.PolicyFile)))))
	}
	approvals := policy.NewApprovals(nil)
	grants := 0
	if opts.approvals != nil {
		grants = approvals.Preload(opts.approvals, team.RunID, func(memberID string) string {
			if m, ok := team.Member(memberID); ok {
				return team.SessionID(m)
			}
			return ""
		})
	}
	bopts = append(bopts, tool.WithApprovals(approvals))
	budget, err := policy.NewBudget(policy.Limits{ToolCalls: opts.TeamToolCalls, Tokens: opts.TeamTokens},
		policy.Limits{ToolCalls: opts.MemberToolCalls, Tokens: opts.MemberTokens})
	if err != nil {
		return nil, 0, fmt.Errorf("budget: %w", err)
	}
	return append(bopts, tool.WithBudget(budget)), grants, nil
}

// storeSink adapts the evidence store to runtime.Sink for one run. Every event payload and every
// artifact passes the run's redaction projection before it is stored.
type storeSink struct {
	store    *evidence.Store
	runID    string
	redactor *policy.Redactor
	// hook and artifactHook, in harness tests, rewrite what the runtime emits and stores (a
	// defective runtime); nil otherwise.
	hook         func(runtime.Event) runtime.Event
	artifactHook func(name string, data []byte) []byte

	// batched, set for a replay, keeps events in pending and appends them in one transaction with
	// the next checkpoint event or at Flush: nothing a replay records gates an effect, so nothing
	// needs to be durable before the next step. saved, when set, receives each checkpoint state
	// as stored. Both are zero for a matrix run.
	batched bool
	saved   func(seq int64, state json.RawMessage)
	mu      sync.Mutex
	pending []evidence.Event
}

func (s *storeSink) Emit(ctx context.Context, ev runtime.Event) error {
	if s.hook != nil {
		ev = s.hook(ev)
	}
	stored := evidence.Event{Type: ev.Type, MemberID: ev.MemberID, SessionID: s.redactor.String(ev.SessionID), Time: ev.Time,
		Payload: redactJSON(s.redactor, ev.Payload)}
	if s.batched {
		s.mu.Lock()
		s.pending = append(s.pending, stored)
		s.mu.Unlock()
		return nil
	}
	_, err := s.store.AppendEvent(ctx, s.runID, stored)
	return err
}

// appendNow appends ev after every pending event, in one transaction, and returns it as stored.
// The caller holds s.mu.
func (s *storeSink) appendNow(ctx context.Context, ev evidence.Event) (evidence.StoredEvent, error) {
	if len(s.pending) == 0 {
		return s.store.AppendEvent(ctx, s.runID, ev)
	}
	stored, err := s.store.AppendEvents(ctx, s.runID, append(s.pending, ev))
	s.pending = nil
	if err != nil {
		return evidence.StoredEvent{}, err
	}
	return stored[len(stored)-1], nil
}

// Flush appends the pending events of a batched sink and turns batching off: what is emitted from
// then on is appended at once.
func (s *storeSink) Flush(ctx context.Context) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.batched = false
	if len(s.pending) == 0 {
		return nil
	}
	_, err := s.store.AppendEvents(ctx, s.runID, s.pending)
	s.pending = nil
	return err
}

// PutArtifact stores data with every secret value masked. A streamed response (text/event-stream)
// passes policy.Redactor.SSE, which also masks a secret split across chunks; anything else is
// masked byte-wise (policy.Redactor.String). A masked artifact's digest is that of the masked
// bytes; the provider_exchange event keeps the wire's own request hash.
func (s *storeSink) PutArtifact(ctx context.Context, name, mediaType string, data []byte) (string, error) {
	if s.artifactHook != nil {
		data = s.artifactHook(name, data)
	}
	if mediaType == "text/event-stream" {
		return s.store.PutArtifact(ctx, s.runID, name, mediaType, s.redactor.SSE(data))
	}
	return s.store.PutArtifact(ctx, s.runID, name, mediaType, []byte(s.redactor.String(string(data))))
}

// vocabulary holds the fixed values the runtime writes into event payloads and checkpoints:
// effect and turn states, outcome sources, access modes, run modes, policy effects, check statuses,
// verdicts and the tools' names. redactJSON never masks a string that is exactly one of them. It
// is a constant table: built at initialization, never written after.
var vocabulary = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range []string{
		"awaiting_approval", "pending", "running", "succeeded", "failed", "unknown", "cancelled",
		"invocation", "reconciliation", "operator", "recovery", "approval", "refusal", "observation",
		"readonly", "write", "execute", "network", "mixed", "live", "dry_run", "observe",
		"allow", "deny", "ask", "passed", "accepted", "rejected", "non_certifiable",
		runtime.TurnCompleted, runtime.TurnInFlight, runtime.TurnPaused,
		"system", "user", "assistant", "tool", "function", "completion",
	} {
		m[w] = true
	}
	for name := range tool.Builtins() {
		m[name] = true
	}
	m[tool.RemotePutName] = true
	return m
}()

// redactJSON masks secret values in every string (and object key) of a JSON payload, through the
// walk of internal/redactjson. Unlike policy.Redactor.JSON it does not mask fields by name: an
// event's vote_key or consensus_key is evidence, not a credential, and tool arguments were already
// projected by the boundary. Strings of the vocabulary are never masked. Payloads without a secret
// are returned byte for byte; a payload that is not JSON is masked as text.
func redactJSON(r *policy.Redactor, raw json.RawMessage) json.RawMessage {
	if r == nil || len(raw) == 0 {
		return raw
	}
	out, err := redactjson.Redact(raw, r.String, redactjson.Options{Mask: policy.Mask, Keys: true,
		Keep: func(s string) bool { return vocabulary[s] }})
	if err != nil {
		return json.RawMessage(r.String(string(raw)))
	}
	return out
}

// httpTimeout bounds each HTTP exchange the harness makes itself (the provider's model list, the
// gateway's usage endpoint), from connecting to the end of the body: a server that accepts and
// never answers fails the request instead of hanging the run.
const httpTimeout = 30 * time.Second

// newHTTPClient returns an HTTP client of the harness's own for those exchanges, with httpTimeout.
// http.DefaultClient is shared with every package in the process, any of which may change it, and
// has no timeout.
func newHTTPClient() *http.Client { return &http.Client{Timeout: httpTimeout} }

// fetchGatewayUsage reads the gateway's usage endpoint over HTTP, as any client of it would.
func fetchGatewayUsage(ctx context.Context, gatewayURL, sessionID string) (gateway.SessionUsage, error) {
	var u gateway.SessionUsage
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, gatewayURL+"/admin/usage/run/"+url.PathEscape(sessionID), nil)
	if err != nil {
		return u, err
	}
	resp, err := newHTTPClient().Do(req)
	if err != nil {
		return u, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return u, fmt.Errorf("GET usage for %s: status %d", sessionID, resp.StatusCode)
	}
	if err := json.NewDecoder(resp.Body).Decode(&u); err != nil {
		return u, fmt.Errorf("decode usage for %s: %w", sessionID, err)
	}
	return u, nil
}

// newRunID returns a globally unique run id, "run-20261130t101500-0a1b2c3d4e5f" (internal/runid):
// UTC time to the second plus 48 random bits, so ids sort by creation and never repeat across
// machines or restarts.
func newRunID() string { return runid.New("run-", time.Now()) }

func upstreamLabel(o Options) string {
	if o.BaseURL == "" {
		return "reference"
	}
	return o.BaseURL
}

// environmentFingerprint is SHA-256 hex over the facts of the machine that decide how a case runs.
func environmentFingerprint(toolVersion string) string {
	d, _ := digestJSON(map[string]string{"go": goruntime.Version(), "goos": goruntime.GOOS, "goarch": goruntime.GOARCH,
		"assay": toolVersion})
	return d
}

// digestJSON is SHA-256 hex of the RFC 8785 canonical JSON of v.
func digestJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

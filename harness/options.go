package harness

import (
	"errors"
	"fmt"
	"io"
	"maps"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/bmatcuk/doublestar/v4"
	"golang.org/x/net/http/httpguts"

	"github.com/assay-audit/assay/evidence/attest"
	"github.com/assay-audit/assay/harness/replay/tolerance"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
	"github.com/assay-audit/assay/tasks"
)

// ErrBadOptions is returned (wrapped, naming the problem) for options or a request that cannot
// run: an *OptionError naming the field, or a provider the preflight refused. Nothing was written
// when it is returned.
var ErrBadOptions = errors.New("invalid options")

// OptionError names the field of Options (or of a request: ReconcileRequest, ApprovalQuery,
// Grant, EffectsQuery) that was refused, and why. Its text is the field's Go name followed by the
// reason ("Concurrency -1 is negative"); a command shows its own flag names instead. It unwraps to
// ErrBadOptions.
type OptionError struct {
	// Field is the refused field's Go name, e.g. "Concurrency".
	Field string
	// Reason follows the field name: e.g. "-1 is negative", "is required with BaseURL".
	Reason string
	// Related are the other fields Reason names by their Go names (e.g. "BaseURL"), in order.
	Related []string
}

func (e *OptionError) Error() string { return e.Field + " " + e.Reason }

// Unwrap returns ErrBadOptions.
func (e *OptionError) Unwrap() error { return ErrBadOptions }

// optionErr returns ErrBadOptions wrapping an *OptionError for field: "invalid options: FIELD
// REASON".
func optionErr(field, format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrBadOptions, &OptionError{Field: field, Reason: fmt.Sprintf(format, args...)})
}

// optionErrRelated is optionErr for a reason that names other fields (related, by their Go names).
func optionErrRelated(field string, related []string, format string, args ...any) error {
	return fmt.Errorf("%w: %w", ErrBadOptions, &OptionError{Field: field, Reason: fmt.Sprintf(format, args...), Related: related})
}

// MaxRepeat is the most repeats of each case one matrix run takes (Options.Repeat, --repeat, a
// matrix file's repeat): each repeat is a run of its own, and a larger number is a typo, not a plan.
const MaxRepeat = 1000

// Options configures a matrix run.
type Options struct {
	// OutDir is the output directory (evidence.duckdb, gateway-usage.db, cases/, reports).
	OutDir string
	// Formations are the catalog names to run, in order (see Catalog: the twelve formations,
	// parallel+vote, parallel+judge, parallel+synthesizer, sequential+remote, parallel+capacity and
	// parallel+worktrees; the bare mode names vote, judge and synthesizer also select those), or the
	// single name "all" for the whole catalog.
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
	// Model is the model id; required with BaseURL, default reference.ModelID without (the embedded
	// reference provider then serves and answers with this id, reference.Config.Model).
	Model string
	// ProviderName names the provider in every run's envelope (evidence.Envelope.Provider), e.g. a
	// matrix file's provider name "ref-a"; "" names it "reference" (embedded) or by its BaseURL. A
	// provider with a BaseURL may not be named "reference", which names the embedded one.
	ProviderName string
	// Repeat is how many times each selected case runs (a matrix file's `repeat: N`), each repeat
	// its own case, run and verdict, recorded with its 1-based index (evidence.Envelope.Repeat) and
	// never a retry of another; 0 runs each case once without a repeat index. Negative is refused.
	Repeat int
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
	// InvocationID names this CLI invocation in every run's envelope (evidence.Envelope.InvocationID), e.g.
	// NewInvocationID(); "" records none. Set once per `assay matrix run`, `assay resume` or replay.
	InvocationID string
	// Command is recorded as the evidence store's lock holder (e.g. "assay matrix run").
	Command string
	// StoreWait is how long to wait for the evidence store's writer lock held by another process;
	// 0 fails at once, naming the holder.
	StoreWait time.Duration
	// Progress receives one line per case step; nil for none. Lines are written whole, one at a
	// time, even when cases run concurrently. Every line passes the run's redaction projection.
	Progress io.Writer
	// ProgressStyle is how progress is shown on Progress: ProgressPlain (the default, "") or
	// ProgressTerminal (Progress should be a terminal). Normalize refuses any other.
	ProgressStyle ProgressStyle

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

	// FormationOptions are formation options as NAME=VALUE (formation.OptionSpec names, `assay
	// formations` lists them), each set on every selected case whose formation has it, over the
	// catalog's options. Only options the checks re-derive from the recorded options may be set;
	// Normalize refuses any other, a name no selected formation has, a value out of range, and a
	// setting the formation's own checks refuse for a case's team. The case manifest records them.
	FormationOptions []string
	// Capacity turns capacity admission on for the selected cases (only the plain parallel cases
	// re-derive it; Normalize refuses others): "" leaves each case's own, a positive integer N admits
	// members through N slots (capacity_aware=true, capacity_declared=N), and "provider" uses the
	// provider's declared max_parallel_requests for Model (GET {base}/models/{model}, the field the
	// runtime reads), read by Run before anything is written and recorded as capacity_declared. A
	// provider that declares none, or no positive integer, is ErrBadOptions: capacity is never
	// silently unlimited.
	Capacity string
	// capacityApplied is set once Capacity's formation options are in FormationOptions.
	capacityApplied bool

	// Task names the task file every case runs: a built-in task's name (tasks.BuiltinNames) or a
	// task file's path; "" is tasks.Default. Normalize reads and validates it (an invalid file is
	// refused naming the file, field and problem); the case manifest binds its name and SHA-256 and
	// each case run stores its bytes (TaskArtifact).
	Task string

	// progressShared is, for a cell of a matrix file (RunMatrix), the matrix's one progress, and
	// progressOffset the number of the matrix's cases before this cell's; nil and 0 otherwise.
	progressShared *progress
	progressOffset int
	// progressLabel is, for a cell of a matrix file whose cells differ in provider, model or task,
	// what tells this cell's progress lines from another's ("provider b, model m2"); "" otherwise.
	progressLabel string

	// hooks stand, in harness tests, for a defective runtime; nil otherwise.
	hooks *testHooks

	// Filled by Normalize from PolicyFile and ApprovalsFile.
	policyFile   *policy.File
	policyDigest string
	approvals    *policy.ApprovalFile
	// task is Task, read and validated by Normalize.
	task *tasks.Task
}

// BuiltinTask is the name of the catalog's built-in team task (implement and test Double), recorded
// in every run's envelope.
const BuiltinTask = "double"

// ReferenceProviderName is the provider name of the embedded reference provider.
const ReferenceProviderName = "reference"

// Default tool-call budgets (Options.MemberToolCalls, Options.TeamToolCalls). The reference
// provider's members call one or two tools per invocation; these leave room for real models and
// iterating formations while bounding a runaway member.
const (
	DefaultMemberToolCalls int64 = 200
	DefaultTeamToolCalls   int64 = 2000
)

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
	task, err := loadTask(o.Task)
	if err != nil {
		return optionErr("Task", "%v", err)
	}
	o.task = task
	if !slices.Contains(Languages(), o.Language) {
		return optionErr("Language", "%q is unknown (known: %s)", o.Language, strings.Join(Languages(), ", "))
	}
	if o.Concurrency < 0 {
		return optionErr("Concurrency", "%d is negative", o.Concurrency)
	}
	switch o.ProgressStyle {
	case "":
		o.ProgressStyle = ProgressPlain
	case ProgressPlain, ProgressTerminal:
	default:
		return optionErr("ProgressStyle", "%q is neither %q nor %q", o.ProgressStyle, ProgressPlain, ProgressTerminal)
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
	if o.BaseURL == "" {
		if _, err := reference.New(reference.Config{Model: o.Model}); err != nil {
			return optionErr("Model", "%q cannot be served by the embedded reference provider: %v", o.Model, err)
		}
	}
	if o.ProviderName != "" && o.BaseURL != "" && o.ProviderName == ReferenceProviderName {
		return optionErrRelated("ProviderName", []string{"BaseURL"}, "%q names the embedded reference provider; a provider with BaseURL needs another name", o.ProviderName)
	}
	if o.Repeat > MaxRepeat {
		return optionErr("Repeat", "%d is more than %d repeats of each case", o.Repeat, MaxRepeat)
	}
	if o.Repeat < 0 {
		return optionErr("Repeat", "%d is negative (at least 1; 0 runs each case once without a repeat index)", o.Repeat)
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
	if err := o.applyCapacity(); err != nil {
		return err
	}
	if err := o.checkFormationOptions(); err != nil {
		return err
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
			return optionErr("PolicyFile", "%s", oneLine(err.Error())) // the error names the file first
		}
		if err := checkPolicyTools(f); err != nil {
			return optionErr("PolicyFile", "%s: %v", o.PolicyFile, err)
		}
		o.policyFile, o.policyDigest = f, digest
	}
	if o.ApprovalsFile != "" {
		f, err := policy.LoadApprovalFile(o.ApprovalsFile)
		if err != nil {
			return optionErr("ApprovalsFile", "%s", oneLine(err.Error())) // the error names the file first
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

package main

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"regexp"
	"strings"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/evidence/attest"
	"github.com/assay-audit/assay/harness"
	"github.com/assay-audit/assay/harness/claims"
	"github.com/assay-audit/assay/harness/gateway"
	"github.com/assay-audit/assay/harness/replay"
	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/reports/audit"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// errUsage marks bad usage the command line itself found: arguments, a flag's value, a flag given
// empty. Commands make such errors with usageErrorf.
var errUsage = errors.New("bad usage")

// usageError is an error of bad usage: its text is err's, and it is errUsage.
type usageError struct{ err error }

func (e *usageError) Error() string   { return e.err.Error() }
func (e *usageError) Unwrap() []error { return []error{errUsage, e.err} }

// usageErrorf returns bad usage (exit 2) with the message format gives; %w wraps as in fmt.Errorf.
func usageErrorf(format string, args ...any) error {
	return &usageError{err: fmt.Errorf(format, args...)}
}

// errCheckFailed marks the thing checked failing: a case not accepted, a run that does not verify,
// an oracle verdict other than passed, a receipt that resolves nothing.
var errCheckFailed = errors.New("check failed")

// checkFailed is a failed check: its text is msg, and it is errCheckFailed.
type checkFailed struct{ msg string }

func (e *checkFailed) Error() string { return e.msg }
func (e *checkFailed) Unwrap() error { return errCheckFailed }

// failed returns a failed check (exit 1) with the message format gives.
func failed(format string, args ...any) error {
	return &checkFailed{msg: fmt.Sprintf(format, args...)}
}

// badInput are the errors that mean bad input, usage or options, or a lock another process holds:
// exit 2. Anything else that stops a command, a failed check or an I/O or store failure, is exit 1.
var badInput = []error{
	errUsage,
	// A path named on the command line that does not exist (the libraries wrap fs.ErrNotExist for
	// the paths their callers give: a store, a graph database, an artifact, an index's PATH).
	fs.ErrNotExist,
	replay.ErrBadInput,
	harness.ErrBadOptions, harness.ErrNotResumable, harness.ErrNoCall, harness.ErrEffectState,
	evidence.ErrLocked, evidence.ErrNoStore, evidence.ErrNotStore, evidence.ErrSchemaVersion, evidence.ErrInvalidArgument,
	evidence.ErrNoRun, evidence.ErrBadQuery, evidence.ErrBadManifest, attest.ErrBadKey, attest.ErrKeyExists, attest.ErrNoAttestations,
	reference.ErrInvalidConfig, reference.ErrNotEffectsDB,
	gateway.ErrConfig, gateway.ErrDatabaseInUse, gateway.ErrSchemaVersion, gateway.ErrNotGatewayDB, claims.ErrMalformedClaim,
	policy.ErrInvalidPolicy, policy.ErrInvalidApprovalFile,
	oracle.ErrInvalidSpec, oracle.ErrUnknownLanguage, oracle.ErrNoArtifact, oracle.ErrInvalidOptions,
	indexer.ErrInvalidOptions, indexer.ErrNoPackages, indexer.ErrSymbolNotFound, indexer.ErrNoSuchPackage,
	indexer.ErrSchemaVersion, indexer.ErrNotGraphDatabase, indexer.ErrHotJournal,
	metrics.ErrNoMetrics, metrics.ErrSnapshotMismatch,
	audit.ErrUnknownRule, audit.ErrBadThreshold,
}

// exitCode is the exit status err means: 0 for none, 2 for bad input (badInput, and an ambiguous
// name given to a graph query), 1 for anything else.
func exitCode(err error) int {
	if err == nil {
		return 0
	}
	for _, target := range badInput {
		if errors.Is(err, target) {
			return 2
		}
	}
	var amb *indexer.AmbiguousSymbolError
	var ambFile *indexer.AmbiguousFileError
	if errors.As(err, &amb) || errors.As(err, &ambFile) {
		return 2
	}
	return 1
}

// report prints err, if any, as one line on w and returns the exit status it means.
func report(w io.Writer, err error) int {
	if err == nil {
		return 0
	}
	if msg := message(err); msg != "" {
		fmt.Fprintln(w, "assay: "+msg)
	}
	return exitCode(err)
}

// flagOf maps the option fields library errors name (harness.OptionError by Go field name,
// evidence.FieldError by its field) to this command line's flags: the libraries speak of their
// options, the user typed flags.
var flagOf = map[string]string{
	// harness.Options
	"OutDir": "--out", "Formations": "--formations", "Profile": "--profile", "Language": "--language",
	"Concurrency": "--concurrency", "BaseURL": "--base-url", "Model": "--model", "APIKey": "--api-key-env",
	"APIKeyEnv": "--api-key-env", "SessionHeader": "--session-header", "Tenant": "--tenant",
	"RequestTimeout": "--request-timeout", "ReferenceFaults": "--reference-fault", "StoreWait": "--wait",
	"PolicyFile": "--policy", "ApprovalsFile": "--approvals", "Mode": "--mode",
	"MemberToolCalls": "--member-tool-calls", "TeamToolCalls": "--team-tool-calls",
	"MemberTokens": "--member-tokens", "TeamTokens": "--team-tokens", "ModelAliases": "--model-alias", "FormationOptions": "--formation-option", "Task": "--task", "Capacity": "--capacity",
	"Repeat": "--matrix", "ProviderName": "--matrix",
	// harness.EffectsQuery, ReconcileRequest, ApprovalRequest, PendingApproval.Grant
	"State": "--state", "Lookup": "--lookup", "EffectsDB": "--effects-db", "Outcome": "--outcome",
	"Note": "--note", "Operator": "--operator", "Expires": "--expires", "Approver": "--approver",
	"PayloadSHA256": "--payload-sha256",
	// oracle.Options
	"Deadline": "--deadline", "Cleanup": "--cleanup",
	// evidence.FieldError fields of OpenOptions, ExportParquet and VerifyOptions
	"wait": "--wait", "dir": "--parquet", "write_manifest": "--write",
}

// fixes are what a user of this command line does about a library error: the libraries say what
// went wrong in their own terms (an OpenOptions.Wait, a Migrate) and the command names its flags
// and commands. Each applies when its error is in the chain; fix returns "" when it has nothing to
// add.
var fixes = []func(err error) string{
	func(err error) string {
		if errors.Is(err, evidence.ErrLocked) {
			return "wait for it or pass --wait DURATION"
		}
		return ""
	},
	func(err error) string {
		var se *evidence.SchemaVersionError
		if errors.As(err, &se) && se.Found < se.Supported {
			return "upgrade it with: assay store migrate --store " + se.Path
		}
		return ""
	},
	func(err error) string {
		if errors.Is(err, evidence.ErrNoStore) {
			return "run 'assay matrix run' first, or name one with --out or --store"
		}
		return ""
	},
	func(err error) string {
		if errors.Is(err, harness.ErrNoReceipt) {
			return "check the backend yourself and decide with --outcome succeeded|failed --note TEXT"
		}
		return ""
	},
	func(err error) string {
		if errors.Is(err, harness.ErrNoCall) {
			return "list the run's calls with 'assay effects RUN'"
		}
		return ""
	},
}

// message is the one line printed for err: its text on one line, the option fields it names
// written as this command line's flags, and the fixes that apply.
func message(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	var oe *harness.OptionError
	if errors.As(err, &oe) {
		msg = strings.Replace(msg, strings.Join(strings.Fields(oe.Error()), " "), asFlags(oe), 1)
	}
	var ore *oracle.OptionError
	if errors.As(err, &ore) {
		msg = strings.Replace(msg, ore.Error(), asFlags(&harness.OptionError{Field: ore.Field, Reason: ore.Reason}), 1)
	}
	var fe *evidence.FieldError
	if errors.As(err, &fe) {
		if flag, ok := flagOf[fe.Field]; ok {
			msg = strings.Replace(msg, "field "+fe.Field+":", flag, 1)
		}
	}
	for _, f := range fixes {
		if fix := f(err); fix != "" {
			msg = fmt.Sprintf("%s; %s", msg, fix)
		}
	}
	return msg
}

// asFlags is oe's text with its field and the fields its reason names written as flags.
func asFlags(oe *harness.OptionError) string {
	text := strings.Join(strings.Fields(oe.Error()), " ")
	for _, field := range append([]string{oe.Field}, oe.Related...) {
		if flag, ok := flagOf[field]; ok {
			text = regexp.MustCompile(`\b`+regexp.QuoteMeta(field)+`\b`).ReplaceAllString(text, flag)
		}
	}
	return text
}

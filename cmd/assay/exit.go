package main

import (
	"errors"
	"fmt"
	"regexp"
	"strings"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/harness"
)

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
	"MemberTokens": "--member-tokens", "TeamTokens": "--team-tokens", "ModelAliases": "--model-alias",
	// harness.EffectsQuery, ReconcileRequest, ApprovalRequest, PendingApproval.Grant
	"State": "--state", "Lookup": "--lookup", "EffectsDB": "--effects-db", "Outcome": "--outcome",
	"Note": "--note", "Operator": "--operator", "Expires": "--expires", "Approver": "--approver",
	"PayloadSHA256": "--payload-sha256",
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
}

// message is the one line printed for err: its text on one line, the option fields it names
// written as this command line's flags, and the fixes that apply.
func message(err error) string {
	msg := strings.Join(strings.Fields(err.Error()), " ")
	var oe *harness.OptionError
	if errors.As(err, &oe) {
		msg = strings.Replace(msg, strings.Join(strings.Fields(oe.Error()), " "), asFlags(oe), 1)
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

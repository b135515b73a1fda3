package harness

import (
	"encoding/json"
	"slices"

	"github.com/assay-audit/assay/internal/redactjson"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/policy"
	"github.com/assay-audit/assay/runtime/tool"
)

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

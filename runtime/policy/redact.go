package policy

import (
	"bytes"
	"encoding/json"
	"slices"
	"sort"
	"strings"

	"github.com/assay-audit/assay/internal/redactjson"
)

// Mask replaces every redacted value.
const Mask = "[REDACTED]"

// MinSecretLen is the shortest secret value the Redactor replaces inside text (bytes): a shorter
// value ("1", "on") would mask unrelated text. Fields with sensitive names are masked whatever their
// length.
const MinSecretLen = 6

// Redactor is the one redaction projection (SAFETY.md rule 13): events, logs, errors and reports
// pass arguments and texts through it before they are written anywhere. It masks known secret
// values wherever they appear and the values of fields whose names mark them as credentials. It is
// immutable and safe for concurrent use.
type Redactor struct {
	secrets []string
}

// NewRedactor returns a redactor for the given secret values (empty and too short ones are
// ignored). A nil *Redactor masks only sensitive field names.
func NewRedactor(secrets ...string) *Redactor {
	var s []string
	for _, v := range secrets {
		if len(v) >= MinSecretLen && !slices.Contains(s, v) {
			s = append(s, v)
		}
	}
	// Longest first, so a secret that contains another is masked whole.
	slices.SortFunc(s, func(a, b string) int { return len(b) - len(a) })
	return &Redactor{secrets: s}
}

// SecretsFromEnv returns the values of the environment entries (KEY=value, as os.Environ gives
// them) that are secrets: the variables named in names (e.g. the one --api-key-env names) and every
// variable whose name marks it as a credential (…KEY, …TOKEN, …SECRET, …PASSWORD, …CREDENTIALS).
func SecretsFromEnv(environ []string, names ...string) []string {
	var out []string
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			continue
		}
		if slices.Contains(names, k) || sensitiveName(k) {
			out = append(out, v)
		}
	}
	return out
}

// sensitiveSuffixes are normalised name endings (lower case, no '_' or '-') that mark a credential.
// "tokens" (usage counts) does not end in "token".
var sensitiveSuffixes = []string{"password", "passwd", "secret", "apikey", "key", "authorization", "token",
	"credential", "credentials", "cookie", "privatekey"}

func sensitiveName(name string) bool {
	n := strings.NewReplacer("_", "", "-", "").Replace(strings.ToLower(name))
	if n == "idempotencykey" || n == "batchkey" {
		return false
	}
	for _, s := range sensitiveSuffixes {
		if strings.HasSuffix(n, s) {
			return true
		}
	}
	return false
}

// String masks every secret value in s.
func (r *Redactor) String(s string) string {
	if r == nil {
		return s
	}
	// Every occurrence of every secret is an interval; overlapping intervals merge into one masked
	// run, so two secrets that share characters leave no part of either visible. Adjacent
	// occurrences stay separate masks.
	type span struct{ from, to int }
	var spans []span
	for _, v := range r.secrets {
		if v == "" {
			continue
		}
		for from := 0; ; {
			i := strings.Index(s[from:], v)
			if i < 0 {
				break
			}
			spans = append(spans, span{from + i, from + i + len(v)})
			from += i + 1
		}
	}
	if len(spans) == 0 {
		return s
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].from < spans[j].from })
	var b strings.Builder
	at := 0
	for k := 0; k < len(spans); {
		cur := spans[k]
		for k++; k < len(spans) && spans[k].from < cur.to; k++ {
			cur.to = max(cur.to, spans[k].to)
		}
		if cur.from < at { // inside an earlier run (a shorter secret within a longer one)
			continue
		}
		b.WriteString(s[at:cur.from])
		b.WriteString(Mask)
		at = cur.to
	}
	b.WriteString(s[at:])
	return b.String()
}

// JSON returns raw with the values of sensitive fields masked and secret values masked inside every
// string. Text that is not valid JSON is masked as a string. The result is compact JSON with object
// keys sorted (json.Marshal of the parsed value). The walk is internal/redactjson's.
func (r *Redactor) JSON(raw json.RawMessage) json.RawMessage {
	if len(bytes.TrimSpace(raw)) == 0 {
		return raw
	}
	out, err := redactjson.Redact(raw, r.String, redactjson.Options{Mask: Mask, Field: sensitiveName, Reencode: true})
	if err != nil {
		out, _ := json.Marshal(r.String(string(raw)))
		return out
	}
	return out
}

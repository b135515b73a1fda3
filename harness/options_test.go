package harness

import (
	"errors"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

// Each refusal of Normalize is an *OptionError naming the field by its Go name, with the other
// fields its reason names in Related, in one line that names no command-line flag.
func TestNormalizeNamesTheRefusedField(t *testing.T) {
	dir := t.TempDir()
	t.Setenv("ASSAY_TEST_EMPTY_KEY", "")
	cases := []struct {
		name    string
		opts    Options
		field   string
		related []string
		reason  string
	}{
		{"negative concurrency", Options{Concurrency: -1}, "Concurrency", nil, "-1 is negative"},
		{"negative store wait", Options{StoreWait: -time.Second}, "StoreWait", nil, "-1s is negative"},
		{"negative request timeout", Options{RequestTimeout: -time.Second}, "RequestTimeout", nil, "-1s is negative"},
		{"negative team tool calls", Options{TeamToolCalls: -1}, "TeamToolCalls", nil, "-1 is negative (0 means the default, 2000)"},
		{"negative member tokens", Options{MemberTokens: -3}, "MemberTokens", nil, "-3 is negative (0 means no limit)"},
		{"unknown formation", Options{Formations: []string{"swarm"}}, "Formations", nil, `unknown formation "swarm"`},
		{"a case twice", Options{Formations: []string{"vote", "parallel+vote"}}, "Formations", nil, "twice"},
		{"unknown profile", Options{Profile: "huge"}, "Profile", nil, "single-file"},
		{"model without base url", Options{BaseURL: "http://127.0.0.1:1/v1"}, "Model", []string{"BaseURL"}, "is required with BaseURL"},
		{"key variable without base url", Options{APIKeyEnv: "HOME"}, "APIKeyEnv", []string{"BaseURL"}, "needs BaseURL"},
		{"key without base url", Options{APIKey: "sk-x"}, "APIKey", []string{"BaseURL"}, "needs BaseURL"},
		{"unset key variable", Options{BaseURL: "http://127.0.0.1:1/v1", Model: "m", APIKeyEnv: "ASSAY_TEST_UNSET_VARIABLE"}, "APIKeyEnv", nil,
			"names ASSAY_TEST_UNSET_VARIABLE, which is not set"},
		{"empty key variable", Options{BaseURL: "http://127.0.0.1:1/v1", Model: "m", APIKeyEnv: "ASSAY_TEST_EMPTY_KEY"}, "APIKeyEnv", nil, "not set (or is empty)"},
		{"faults with a base url", Options{BaseURL: "http://127.0.0.1:1/v1", Model: "m",
			ReferenceFaults: []reference.Fault{{Member: "exec-1", Kind: reference.FaultDropUsage}}}, "ReferenceFaults", []string{"BaseURL"}, "not with BaseURL"},
	}
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			c.opts.OutDir = filepath.Join(dir, string(rune('a'+i)))
			err := c.opts.Normalize()
			var oe *OptionError
			if !errors.Is(err, ErrBadOptions) || !errors.As(err, &oe) {
				t.Fatalf("err %v, want ErrBadOptions wrapping an *OptionError", err)
			}
			if oe.Field != c.field || !slices.Equal(oe.Related, c.related) || !strings.Contains(oe.Reason, c.reason) {
				t.Fatalf("%+v, want field %s (related %v) and a reason containing %q", oe, c.field, c.related, c.reason)
			}
			if msg := err.Error(); strings.Contains(msg, "--") || strings.Contains(msg, "\n") || !strings.Contains(msg, c.field+" ") {
				t.Fatalf("message %q: want one line naming %s and no flag", msg, c.field)
			}
		})
	}
}

// Zero values mean the defaults, whatever the caller is: a command passing 0 for a budget or a
// timeout gets what a library caller leaving it out gets.
func TestNormalizeReadsZeroAsTheDefault(t *testing.T) {
	o := Options{OutDir: filepath.Join(t.TempDir(), "out")}
	if err := o.Normalize(); err != nil {
		t.Fatal(err)
	}
	if o.MemberToolCalls != DefaultMemberToolCalls || o.TeamToolCalls != DefaultTeamToolCalls || o.RequestTimeout != 60*time.Second ||
		o.Concurrency != 1 || o.MemberTokens != 0 || o.TeamTokens != 0 || o.Model != reference.ModelID ||
		!slices.Equal(o.Formations, []string{"sequential", "parallel"}) {
		t.Fatalf("defaults %+v", o)
	}
}

// APIKeyEnv names the variable the key is read from; the key itself is never in an error.
func TestNormalizeReadsTheKeyFromTheNamedVariable(t *testing.T) {
	t.Setenv("ASSAY_TEST_PROVIDER_KEY", "sk-test-secret")
	o := Options{OutDir: filepath.Join(t.TempDir(), "out"), BaseURL: "http://127.0.0.1:1/v1", Model: "m", APIKeyEnv: "ASSAY_TEST_PROVIDER_KEY"}
	if err := o.Normalize(); err != nil || o.APIKey != "sk-test-secret" {
		t.Fatalf("APIKey %q, %v", o.APIKey, err)
	}
	// A key given outright wins over the variable.
	o = Options{OutDir: o.OutDir, BaseURL: o.BaseURL, Model: "m", APIKey: "sk-given", APIKeyEnv: "ASSAY_TEST_PROVIDER_KEY"}
	if err := o.Normalize(); err != nil || o.APIKey != "sk-given" {
		t.Fatalf("APIKey %q, %v", o.APIKey, err)
	}
}

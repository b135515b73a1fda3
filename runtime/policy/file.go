package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path"
	"path/filepath"
	"slices"
	"strings"

	"github.com/bmatcuk/doublestar/v4"
)

// File is a policy file: an ordered list of rules and a default. The first rule that matches a call
// decides it; when none matches, Default does. YAML and JSON are both accepted (LoadFile parses a .json file as
// JSON, strictly, then as the YAML subset it is); unknown keys, duplicate keys and a missing version
// or default are errors.
//
//	version: 1
//	default: deny
//	rules:
//	  - id: read-anything
//	    access: [readonly]
//	    decision: allow
//	  - id: sources
//	    tools: [write_file, edit_file]
//	    paths: ["**/*.go"]
//	    decision: allow
//	  - id: secrets
//	    paths: ["**/.env", "**/*.pem"]
//	    decision: deny
//	  - id: commands
//	    tools: [shell]
//	    decision: ask
//	    disclose: false
type File struct {
	Version int    `yaml:"version"`
	Default Effect `yaml:"default"`
	Rules   []Rule `yaml:"rules"`
	// DefaultDisclose is whether a call decided by Default may have its result shown (default true).
	DefaultDisclose *bool `yaml:"default_disclose"`
}

// Rule is one rule of a policy file. Each selector that is set must match; an unset selector
// matches anything. Patterns are doublestar globs over slash-separated names.
type Rule struct {
	// ID names the rule in decisions and approval scopes. Required, unique.
	ID string `yaml:"id"`
	// Tools are tool-name patterns ("write_file", "*_file").
	Tools []string `yaml:"tools"`
	// Access are access modes (readonly, write, execute, network, mixed).
	Access []string `yaml:"access"`
	// Members are member-id patterns.
	Members []string `yaml:"members"`
	// Paths are patterns over the member-relative paths the call touches. An allow or ask rule
	// matches only when the call touches at least one path and every path matches a pattern; a deny
	// rule matches when any path matches. A tool that touches no path never matches a rule with
	// paths.
	Paths []string `yaml:"paths"`
	// Decision is allow, deny or ask.
	Decision Effect `yaml:"decision"`
	// Disclose is whether the result may be shown to the member (default true for allow, false for
	// ask: an approval must grant disclosure separately).
	Disclose *bool `yaml:"disclose"`
	// Reason is recorded with the decision.
	Reason string `yaml:"reason"`
}

// ErrInvalidPolicy is returned (wrapped, naming the problem) for a policy file that cannot be used.
var ErrInvalidPolicy = errors.New("invalid policy file")

var accessModes = []string{"readonly", "write", "execute", "network", "mixed"}

// ParseFile parses and validates a policy file's bytes and returns it with its digest: the SHA-256
// hex (64 chars) of data exactly as given, which is the run's policy digest.
func ParseFile(data []byte) (*File, string, error) {
	return parseFile(data, false)
}

// parseFile is ParseFile, parsing data as JSON, strictly, when isJSON.
func parseFile(data []byte, isJSON bool) (*File, string, error) {
	var f File
	if err := decodeStrict(data, isJSON, &f, ErrInvalidPolicy); err != nil {
		return nil, "", err
	}
	if err := f.validate(); err != nil {
		return nil, "", err
	}
	sum := sha256.Sum256(data)
	return &f, hex.EncodeToString(sum[:]), nil
}

// LoadFile reads and parses the policy file at name (ParseFile); a name ending in .json is parsed
// as JSON, strictly (a trailing comma is an error, not YAML). Errors name the file first:
// "policy.yaml: rule 1: unknown key "tool" at line 5 (did you mean "tools"?)".
func LoadFile(name string) (*File, string, error) {
	data, err := os.ReadFile(name)
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, readErr(err))
	}
	f, digest, err := parseFile(data, isJSONName(name))
	if err != nil {
		return nil, "", fmt.Errorf("%s: %w", name, err)
	}
	return f, digest, nil
}

// isJSONName reports whether a file name says JSON (.json, any case).
func isJSONName(name string) bool { return strings.EqualFold(filepath.Ext(name), ".json") }

func (f *File) validate() error {
	bad := func(format string, args ...any) error {
		return &fileError{kind: ErrInvalidPolicy, msg: fmt.Sprintf(format, args...)}
	}
	if f.Version != 1 {
		return bad("version must be 1, got %d", f.Version)
	}
	if !f.Default.Valid() {
		return bad("default must be allow, deny or ask, got %q", f.Default)
	}
	ids := map[string]bool{}
	for i, r := range f.Rules {
		if r.ID == "" {
			return bad("rule %d has no id", i+1)
		}
		if ids[r.ID] {
			return bad("rule id %q is used twice", r.ID)
		}
		ids[r.ID] = true
		if !r.Decision.Valid() {
			return bad("rule %s: decision must be allow, deny or ask, got %q", r.ID, r.Decision)
		}
		for _, a := range r.Access {
			if !slices.Contains(accessModes, a) {
				return bad("rule %s: access %q is not one of %v", r.ID, a, accessModes)
			}
		}
		for _, list := range [][]string{r.Tools, r.Members, r.Paths} {
			for _, p := range list {
				if p == "" || !doublestar.ValidatePattern(p) {
					return bad("rule %s: pattern %q is not a valid glob", r.ID, p)
				}
			}
		}
		for _, p := range r.Paths {
			if path.IsAbs(p) {
				return bad("rule %s: path pattern %q is absolute; paths are relative to the member's directory", r.ID, p)
			}
		}
	}
	return nil
}

// Policy returns the file as a Policy named name (e.g. the file's base name).
func (f *File) Policy(name string) Policy { return filePolicy{name: name, f: f} }

type filePolicy struct {
	name string
	f    *File
}

func (p filePolicy) Name() string { return p.name }

func (p filePolicy) Decide(ctx context.Context, req Request) (Decision, error) {
	for _, r := range p.f.Rules {
		ok, err := r.matches(req)
		if err != nil {
			return Decision{}, fmt.Errorf("rule %s: %w", r.ID, err)
		}
		if ok {
			reason := r.Reason
			if reason == "" {
				reason = "matched rule " + r.ID
			}
			return Decision{Effect: r.Decision, Rule: r.ID, Reason: reason, Disclose: disclose(r.Decision, r.Disclose)}, nil
		}
	}
	return Decision{Effect: p.f.Default, Rule: "default", Reason: "no rule matched; the file's default",
		Disclose: disclose(p.f.Default, p.f.DefaultDisclose)}, nil
}

func disclose(e Effect, set *bool) bool {
	if set != nil {
		return *set
	}
	return e == Allow
}

func (r Rule) matches(req Request) (bool, error) {
	for _, sel := range []struct {
		patterns []string
		value    string
	}{{r.Tools, req.Tool}, {r.Members, req.MemberID}} {
		if len(sel.patterns) == 0 {
			continue
		}
		ok, err := anyMatch(sel.patterns, sel.value)
		if err != nil || !ok {
			return false, err
		}
	}
	if len(r.Access) > 0 && !slices.Contains(r.Access, req.Access) {
		return false, nil
	}
	if len(r.Paths) == 0 {
		return true, nil
	}
	if len(req.Paths) == 0 {
		return false, nil
	}
	for _, p := range req.Paths {
		ok, err := anyMatch(r.Paths, p)
		if err != nil {
			return false, err
		}
		if r.Decision == Deny && ok {
			return true, nil
		}
		if r.Decision != Deny && !ok {
			return false, nil
		}
	}
	return r.Decision != Deny, nil
}

func anyMatch(patterns []string, v string) (bool, error) {
	for _, p := range patterns {
		ok, err := doublestar.Match(p, v)
		if err != nil {
			return false, fmt.Errorf("pattern %q: %w", p, err)
		}
		if ok {
			return true, nil
		}
	}
	return false, nil
}

// AllowAll is the policy used when a run names no policy file: every call the member's allowed
// tools admit is allowed and disclosed. The allowed-tools gate, the path rooting and the budgets
// still apply; it is recorded as policy "builtin:allow-allowed-tools" with an empty digest.
func AllowAll() Policy {
	return Func{PolicyName: "builtin:allow-allowed-tools", F: func(ctx context.Context, req Request) (Decision, error) {
		return Decision{Effect: Allow, Reason: "no policy file: calls within the member's allowed tools are allowed", Disclose: true}, nil
	}}
}

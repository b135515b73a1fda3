package policy

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A policy or approval file's problems are said in the file's terms: the file, the rule or
// approval, the key, the line and the key meant; no Go type names. A .json file is JSON, strictly.
func TestFileErrorsSayWhatToFix(t *testing.T) {
	dir := t.TempDir()
	write := func(name, body string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	for _, tc := range []struct {
		name, file, body, want string
		approvals              bool
	}{
		{"unknown key in a rule", "policy.yaml", "version: 1\ndefault: deny\nrules:\n  - id: a\n    tool: [write_file]\n    decision: allow\n",
			`policy.yaml: rule 1: unknown key "tool" at line 5 (did you mean "tools"?)`, false},
		{"misspelt key in the second rule", "p.yaml", "version: 1\ndefault: deny\nrules:\n  - id: a\n    decision: allow\n  - id: b\n    reasn: x\n    decision: deny\n",
			`p.yaml: rule 2: unknown key "reasn" at line 7 (did you mean "reason"?)`, false},
		{"unknown top-level key", "p.yaml", "version: 1\ndefault: deny\nrulez: []\n", `p.yaml: unknown key "rulez" at line 3 (did you mean "rules"?)`, false},
		{"JSON trailing comma", "p.json", `{"version": 1, "default": "deny", "rules": [],}`, "p.json: not valid JSON (line 1, column 47)", false},
		{"JSON with a YAML comment", "p.json", "# c\n{\"version\": 1, \"default\": \"deny\"}", "p.json: not valid JSON (line 1, column 1)", false},
		{"approval unknown key", "a.json", `{"version": 1, "approvals": [{"member": "x"}]}`, `a.json: approval 1: unknown key "member" at line 1 (did you mean "member_id"?)`, true},
		{"approval JSON trailing comma", "a.json", `{"version": 1, "approvals": [],}`, "a.json: not valid JSON", true},
		// A value of the wrong type is said by key and line with what it must be, never as a Go type
		// ("cannot unmarshal !!map into []policy.Rule"); a JSON number is not read as a string.
		{"rules not a list", "p.json", `{"version": 1, "default": "allow", "rules": {"id": "x"}}`, `p.json: "rules" at line 1 must be a list, not a mapping`, false},
		{"tools a string", "p.yaml", "version: 1\ndefault: allow\nrules:\n  - id: x\n    tools: shell\n    decision: ask\n",
			`p.yaml: rule 1: "tools" at line 5 must be a list, not the string "shell"`, false},
		{"a tool a number", "p.yaml", "version: 1\ndefault: allow\nrules:\n  - id: x\n    tools: [write_file, 7]\n    decision: ask\n",
			`p.yaml: rule 1: "tools" at line 5 item 2 must be a string, not the number 7`, false},
		{"version a word", "p.yaml", "version: one\n", `p.yaml: "version" at line 1 must be a whole number, not the string "one"`, false},
		{"an id a number", "p.json", `{"version": 1, "default": "allow", "rules": [{"id": 5, "decision": "ask"}]}`, `p.json: rule 1: "id" at line 1 must be a string, not the number 5`, false},
		{"disclose a word", "p.yaml", "version: 1\ndefault: allow\ndefault_disclose: sometimes\n", `p.yaml: "default_disclose" at line 3 must be true or false, not the string "sometimes"`, false},
		{"the file a list", "p.json", `[1, 2]`, `p.json: the file must be a mapping of keys, not a list`, false},
		{"a key twice", "p.yaml", "version: 1\ndefault: allow\ndefault: deny\n", `p.yaml: key "default" is given twice, at lines 2 and 3`, false},
		{"a key twice on one JSON line", "a.json", `{"version": 1, "approvals": [{"member_id": "a", "member_id": "b"}]}`,
			`a.json: approval 1: key "member_id" is given twice, on line 1 (columns 31 and 49)`, true},
		{"approval member a number", "a.json", `{"version": 1, "approvals": [{"member_id": 5}]}`, `a.json: approval 1: "member_id" at line 1 must be a string, not the number 5`, true},
		{"approval expiry not a time", "a.json", `{"version": 1, "approvals": [{"member_id": "m", "expires_at": "tomorrow"}]}`,
			`a.json: approval 1: "expires_at" at line 1 must be a time (RFC 3339: 2026-12-02T15:04:05Z), not the string "tomorrow"`, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := write(tc.file, tc.body)
			var err error
			kind := ErrInvalidPolicy
			if tc.approvals {
				_, err = LoadApprovalFile(path)
				kind = ErrInvalidApprovalFile
			} else {
				_, _, err = LoadFile(path)
			}
			if err == nil || !strings.HasPrefix(err.Error(), filepath.Join(dir, tc.want)) || !errors.Is(err, kind) {
				t.Fatalf("error %v, want %q (and errors.Is %v)", err, filepath.Join(dir, tc.want), kind)
			}
			for _, leak := range []string{"policy.Rule", "policy.File", "not found in type", "invalid policy file", "invalid approval file", "unmarshal", "!!", "2006-01-02"} {
				if strings.Contains(err.Error(), leak) {
					t.Errorf("the error says %q: %v", leak, err)
				}
			}
		})
	}
	// Valid JSON parses, as the same policy as its YAML.
	if _, _, err := LoadFile(write("ok.json", `{"version": 1, "default": "deny", "rules": [{"id": "a", "tools": ["write_file"], "decision": "allow"}]}`)); err != nil {
		t.Fatalf("a valid JSON policy: %v", err)
	}
	_, _, err := LoadFile(filepath.Join(dir, "none.yaml"))
	if err == nil || err.Error() != filepath.Join(dir, "none.yaml")+": no such file or directory" || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("a missing file: %v", err)
	}
}

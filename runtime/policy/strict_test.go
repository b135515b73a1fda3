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
			for _, leak := range []string{"policy.Rule", "not found in type", "invalid policy file", "invalid approval file"} {
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

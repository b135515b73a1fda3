package policy

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func request(tool, access string, paths ...string) Request {
	return Request{RunID: "run-1", MemberID: "exec-1", SessionID: "run-1-exec-1", CallID: "c1", Tool: tool,
		Access: access, Paths: paths, PayloadSHA256: strings.Repeat("a", 64), Arguments: json.RawMessage(`{}`)}
}

func TestEngineFailsClosed(t *testing.T) {
	allow := Func{PolicyName: "allow", F: func(ctx context.Context, r Request) (Decision, error) {
		return Decision{Effect: Allow, Disclose: true}, nil
	}}
	release := make(chan struct{})
	defer close(release)
	cases := []struct {
		name     string
		policies []Policy
		req      Request
		want     Effect
		reason   string
	}{
		{"allow", []Policy{allow}, request("read_file", "readonly"), Allow, ""},
		{"error denies", []Policy{allow, Func{"err", func(ctx context.Context, r Request) (Decision, error) {
			return Decision{Effect: Allow}, errors.New("policy backend down")
		}}}, request("read_file", "readonly"), Deny, "policy backend down"},
		{"panic denies", []Policy{Func{"panics", func(ctx context.Context, r Request) (Decision, error) {
			panic("boom")
		}}, allow}, request("read_file", "readonly"), Deny, "panicked"},
		{"timeout denies", []Policy{Func{"slow", func(ctx context.Context, r Request) (Decision, error) {
			select {
			case <-release:
			case <-ctx.Done():
			}
			return Decision{Effect: Allow}, nil
		}}}, request("read_file", "readonly"), Deny, "did not decide"},
		{"malformed denies", []Policy{Func{"maybe", func(ctx context.Context, r Request) (Decision, error) {
			return Decision{Effect: "maybe"}, nil
		}}}, request("read_file", "readonly"), Deny, "malformed"},
		{"empty decision denies", []Policy{Func{"empty", func(ctx context.Context, r Request) (Decision, error) {
			return Decision{}, nil
		}}}, request("read_file", "readonly"), Deny, "malformed"},
		{"no policies deny", nil, request("read_file", "readonly"), Deny, "no policy"},
		{"missing session denies", []Policy{allow}, func() Request { r := request("read_file", "readonly"); r.SessionID = ""; return r }(), Deny, "session_id"},
		{"missing access denies", []Policy{allow}, request("read_file", ""), Deny, "access"},
		{"ask wins over allow", []Policy{allow, Func{"ask", func(ctx context.Context, r Request) (Decision, error) {
			return Decision{Effect: Ask, Rule: "r"}, nil
		}}}, request("shell", "execute"), Ask, ""},
		{"deny wins over ask", []Policy{Func{"ask", func(ctx context.Context, r Request) (Decision, error) {
			return Decision{Effect: Ask}, nil
		}}, Func{"deny", func(ctx context.Context, r Request) (Decision, error) {
			return Decision{Effect: Deny, Reason: "no"}, nil
		}}}, request("shell", "execute"), Deny, "no"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := NewEngine("d1", 50*time.Millisecond, c.policies...).Decide(context.Background(), c.req)
			if d.Effect != c.want || !strings.Contains(d.Reason, c.reason) {
				t.Fatalf("decision %+v, want %s with reason containing %q", d, c.want, c.reason)
			}
		})
	}
}

func TestPoliciesCannotChangeWhatTheNextOneSees(t *testing.T) {
	var seen string
	mutate := Func{"mutate", func(ctx context.Context, r Request) (Decision, error) {
		r.Paths[0] = "../etc/passwd"
		r.Arguments[1] = 'X'
		return Decision{Effect: Allow}, nil
	}}
	look := Func{"look", func(ctx context.Context, r Request) (Decision, error) {
		seen = r.Paths[0] + string(r.Arguments)
		return Decision{Effect: Allow}, nil
	}}
	req := request("write_file", "write", "a.go")
	req.Arguments = json.RawMessage(`{"path":"a.go"}`)
	NewEngine("", 0, mutate, look).Decide(context.Background(), req)
	if seen != `a.go{"path":"a.go"}` || req.Paths[0] != "a.go" {
		t.Fatalf("a policy changed the request: %q", seen)
	}
}

const policyYAML = `version: 1
default: deny
rules:
  - id: secrets
    paths: ["**/.env", "**/*.pem"]
    decision: deny
  - id: read
    access: [readonly]
    decision: allow
  - id: sources
    tools: [write_file, edit_file]
    paths: ["**/*.go"]
    decision: allow
  - id: commands
    tools: [shell]
    decision: ask
`

func TestPolicyFileRules(t *testing.T) {
	f, digest, err := ParseFile([]byte(policyYAML))
	if err != nil {
		t.Fatal(err)
	}
	sum := sha256.Sum256([]byte(policyYAML))
	if digest != hex.EncodeToString(sum[:]) {
		t.Fatalf("digest %s is not the SHA-256 of the file", digest)
	}
	e := NewEngine(digest, 0, f.Policy("policy.yaml"))
	cases := []struct {
		name string
		req  Request
		want Effect
		rule string
	}{
		{"read anything", request("read_file", "readonly", "x/y.txt"), Allow, "read"},
		{"reading a secret is denied before the read rule", request("read_file", "readonly", "conf/.env"), Deny, "secrets"},
		{"write a go file", request("write_file", "write", "pkg/a.go"), Allow, "sources"},
		{"write go and a secret: the deny rule matches any path", request("write_file", "write", "a.go", "k.pem"), Deny, "secrets"},
		{"write go and text: the allow rule needs every path", request("write_file", "write", "a.go", "notes.txt"), Deny, "default"},
		{"shell asks", request("shell", "execute"), Ask, "commands"},
		{"write without a path falls to default", request("write_file", "write"), Deny, "default"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			d := e.Decide(context.Background(), c.req)
			if d.Effect != c.want || d.Rule != c.rule {
				t.Fatalf("%+v, want %s by %s", d, c.want, c.rule)
			}
			if !strings.Contains(d.Scope, digest) {
				t.Fatalf("scope %q does not bind the digest", d.Scope)
			}
		})
	}
	if d := e.Decide(context.Background(), request("shell", "execute")); d.Disclose {
		t.Fatal("an ask rule disclosed its result by default")
	}
}

func TestPolicyFileJSONAndRefusals(t *testing.T) {
	if _, _, err := ParseFile([]byte(`{"version":1,"default":"ask","rules":[{"id":"a","tools":["read_file"],"decision":"allow"}]}`)); err != nil {
		t.Fatalf("JSON policy: %v", err)
	}
	bad := map[string]string{
		"unknown key":        "version: 1\ndefault: deny\nrulez: []\n",
		"duplicate key":      "version: 1\ndefault: deny\ndefault: allow\n",
		"missing default":    "version: 1\n",
		"bad decision":       "version: 1\ndefault: deny\nrules:\n  - id: a\n    decision: maybe\n",
		"bad access":         "version: 1\ndefault: deny\nrules:\n  - id: a\n    access: [root]\n    decision: allow\n",
		"duplicate rule id":  "version: 1\ndefault: deny\nrules:\n  - {id: a, decision: allow}\n  - {id: a, decision: deny}\n",
		"absolute path":      "version: 1\ndefault: deny\nrules:\n  - {id: a, paths: [/etc/*], decision: allow}\n",
		"bad glob":           "version: 1\ndefault: deny\nrules:\n  - {id: a, paths: ['[x'], decision: allow}\n",
		"two documents":      "version: 1\ndefault: deny\n---\nversion: 1\ndefault: allow\n",
		"empty":              "",
		"wrong version":      "version: 2\ndefault: deny\n",
		"rule without an id": "version: 1\ndefault: deny\nrules:\n  - {decision: allow}\n",
	}
	for name, text := range bad {
		if _, _, err := ParseFile([]byte(text)); !errors.Is(err, ErrInvalidPolicy) {
			t.Errorf("%s: %v, want ErrInvalidPolicy", name, err)
		}
	}
}

func binding() Binding {
	return Binding{RunID: "run-1", MemberID: "exec-1", SessionID: "run-1-exec-1", CallID: "c1", Tool: "shell",
		PayloadSHA256: strings.Repeat("a", 64), SchemaSHA256: strings.Repeat("b", 64), Access: "execute", Scope: "policy:x;f/commands"}
}

func TestApprovalBindsTheExactAction(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	clock := func() time.Time { return now }
	grant := func(a *Approvals, b Binding) error {
		_, err := a.Grant(Grant{Binding: b, Approver: "alice", Source: "operator", ExpiresAt: now.Add(time.Hour)})
		return err
	}
	changed := map[string]func(*Binding){
		"payload":  func(b *Binding) { b.PayloadSHA256 = strings.Repeat("c", 64) },
		"session":  func(b *Binding) { b.SessionID = "run-1-other" },
		"schema":   func(b *Binding) { b.SchemaSHA256 = strings.Repeat("d", 64) },
		"access":   func(b *Binding) { b.Access = "write" },
		"policy":   func(b *Binding) { b.Scope = "policy:y;f/commands" },
		"revision": func(b *Binding) { b.Revision = 1 },
		"tool":     func(b *Binding) { b.Tool = "write_file" },
	}
	for name, change := range changed {
		t.Run("changed "+name+" after approval", func(t *testing.T) {
			a := NewApprovals(clock)
			a.Request(binding(), "ask")
			if err := grant(a, binding()); err != nil {
				t.Fatal(err)
			}
			b := binding()
			change(&b)
			if _, err := a.Consume(b); !errors.Is(err, ErrApprovalMismatch) {
				t.Fatalf("%v, want ErrApprovalMismatch", err)
			}
		})
		t.Run("approver shown another "+name, func(t *testing.T) {
			a := NewApprovals(clock)
			a.Request(binding(), "ask")
			b := binding()
			change(&b)
			if err := grant(a, b); !errors.Is(err, ErrApprovalMismatch) {
				t.Fatalf("%v, want ErrApprovalMismatch", err)
			}
		})
	}

	a := NewApprovals(clock)
	a.Request(binding(), "ask")
	sibling := binding()
	sibling.CallID = "c2"
	if err := grant(a, sibling); !errors.Is(err, ErrNoSuchApproval) {
		t.Fatalf("grant of a sibling call: %v", err)
	}
	if err := grant(a, binding()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Consume(sibling); !errors.Is(err, ErrNoApproval) {
		t.Fatalf("sibling call used the approval: %v", err)
	}
	if _, err := a.Consume(binding()); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Consume(binding()); !errors.Is(err, ErrApprovalUsed) {
		t.Fatalf("second use: %v", err)
	}

	exp := NewApprovals(clock)
	exp.Request(binding(), "ask")
	if _, err := exp.Grant(Grant{Binding: binding(), Approver: "alice", Source: "operator", ExpiresAt: now.Add(time.Minute)}); err != nil {
		t.Fatal(err)
	}
	now = now.Add(2 * time.Minute)
	if _, err := exp.Consume(binding()); !errors.Is(err, ErrApprovalExpired) {
		t.Fatalf("expired: %v", err)
	}

	m := NewApprovals(clock)
	m.Request(binding(), "ask")
	for _, src := range []string{"model", "", "retrieved_document"} {
		if _, err := m.Grant(Grant{Binding: binding(), Approver: "assistant", Source: src, ExpiresAt: now.Add(time.Hour)}); !errors.Is(err, ErrNotAnApprover) {
			t.Fatalf("source %q: %v", src, err)
		}
	}
	if !m.Revoke(binding().Key()) {
		t.Fatal("nothing revoked")
	}
	if err := grant(m, binding()); !errors.Is(err, ErrNoSuchApproval) {
		t.Fatalf("grant after revocation: %v", err)
	}
}

func TestTwoMembersRacingForTheLastUnit(t *testing.T) {
	for round := 0; round < 50; round++ {
		b, err := NewBudget(Limits{ToolCalls: 3}, Limits{})
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range []string{"a", "b"} {
			r, err := b.Reserve(m, 1, 0, "dispatch")
			if err != nil {
				t.Fatal(err)
			}
			r.Commit(nil)
		}
		var wins atomic.Int32
		var wg sync.WaitGroup
		start := make(chan struct{})
		for _, m := range []string{"a", "b"} {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				r, err := b.Reserve(m, 1, 0, "dispatch")
				if err == nil {
					wins.Add(1)
					r.Commit(nil)
				} else if !errors.Is(err, ErrBudgetExhausted) {
					t.Error(err)
				}
			}()
		}
		close(start)
		wg.Wait()
		if wins.Load() != 1 || b.Team().ToolCalls != 3 {
			t.Fatalf("round %d: %d members got the last unit, team used %d", round, wins.Load(), b.Team().ToolCalls)
		}
	}
}

func TestBudgetReleaseAndUnknownTokens(t *testing.T) {
	b, _ := NewBudget(Limits{Tokens: 1000}, Limits{ToolCalls: 1})
	r, err := b.Reserve("a", 1, 100, "dispatch")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Reserve("a", 1, 0, "dispatch"); !errors.Is(err, ErrBudgetExhausted) {
		t.Fatalf("reserved capacity was handed out twice: %v", err)
	}
	r.Release()
	r.Commit(nil) // no effect after Release
	if u := b.Member("a"); u.ToolCalls != 0 || u.ReservedToolCalls != 0 || u.TokensUnknown {
		t.Fatalf("after release: %+v", u)
	}
	r2, _ := b.Reserve("a", 1, 100, "dispatch")
	r2.Commit(nil) // the provider reported no usage
	if u := b.Team(); !u.TokensUnknown || u.Tokens != 0 {
		t.Fatalf("unknown usage counted: %+v", u)
	}
	if _, err := b.Reserve("b", 0, 10, "request"); !errors.Is(err, ErrBudgetUnevaluable) {
		t.Fatalf("token limit evaluated over unknown usage: %v", err)
	}
	if _, err := NewBudget(Limits{ToolCalls: -1}, Limits{}); err == nil {
		t.Fatal("negative limit accepted")
	}
}

func TestRedactor(t *testing.T) {
	secret := "sk-live-0123456789abcdef"
	env := []string{"HOME=/root", "ASSAY_PROVIDER_KEY=" + secret, "MY_TOKEN=tok-987654321", "SHORT_SECRET=ab", "PATH=/bin"}
	secrets := SecretsFromEnv(env, "PATH_NOT_SECRET")
	r := NewRedactor(secrets...)
	if got := r.String("error: 401 for key " + secret + " and tok-987654321"); strings.Contains(got, secret) || strings.Contains(got, "tok-987654321") {
		t.Fatalf("secret left in %q", got)
	}
	if strings.Contains(r.String("/root/bin"), Mask) {
		t.Fatal("a non-secret was masked")
	}
	raw := json.RawMessage(`{"argv":["curl","-H","Authorization: Bearer ` + secret + `"],"api_key":"short","password":"x","prompt_tokens":12,"idempotency_key":"run:m:c"}`)
	out := string(r.JSON(raw))
	for _, leaked := range []string{secret, `"short"`, `"x"`} {
		if strings.Contains(out, leaked) {
			t.Fatalf("%s leaked in %s", leaked, out)
		}
	}
	if !strings.Contains(out, `"prompt_tokens":12`) || !strings.Contains(out, `"idempotency_key":"run:m:c"`) {
		t.Fatalf("non-secret fields were masked: %s", out)
	}
	if got := string(r.JSON(json.RawMessage(`{"broken": "` + secret))); strings.Contains(got, secret) {
		t.Fatalf("invalid JSON leaked: %s", got)
	}
}

func TestApprovalFile(t *testing.T) {
	now := time.Date(2026, 11, 30, 12, 0, 0, 0, time.UTC)
	a := NewApprovals(func() time.Time { return now })
	f, err := ParseApprovalFile([]byte(`{"version":1,"approvals":[
	 {"member_id":"m1","call_id":"c1","tool":"shell","payload_sha256":"` + strings.Repeat("a", 64) + `","schema_sha256":"` + strings.Repeat("b", 64) + `","access":"execute","policy_scope":"s","approver":"alice","expires_at":"2026-11-30T13:00:00Z"},
	 {"run_id":"run-9","session_id":"run-9-m1","member_id":"m1","call_id":"c2","tool":"shell","payload_sha256":"x","schema_sha256":"y","access":"execute","policy_scope":"s","approver":"alice","expires_at":"2026-11-30T13:00:00Z"},
	 {"member_id":"m1","call_id":"c3","tool":"shell","payload_sha256":"x","schema_sha256":"y","access":"execute","policy_scope":"s","approver":"alice","expires_at":"2026-11-30T11:00:00Z"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	if n := a.Preload(f, "run-1", func(m string) string { return "run-1-" + m }); n != 1 {
		t.Fatalf("preloaded %d, want 1 (another run's and an expired entry skipped)", n)
	}
	b := Binding{RunID: "run-1", MemberID: "m1", SessionID: "run-1-m1", CallID: "c1", Tool: "shell",
		PayloadSHA256: strings.Repeat("a", 64), SchemaSHA256: strings.Repeat("b", 64), Access: "execute", Scope: "s"}
	if ap, err := a.Consume(b); err != nil || ap.Source != "approval_file" {
		t.Fatalf("%+v %v", ap, err)
	}
	for name, text := range map[string]string{
		"missing payload":     `{"version":1,"approvals":[{"member_id":"m1","call_id":"c1","tool":"shell","schema_sha256":"y","access":"execute","policy_scope":"s","approver":"a","expires_at":"2026-11-30T13:00:00Z"}]}`,
		"missing expiry":      `{"version":1,"approvals":[{"member_id":"m1","call_id":"c1","tool":"shell","payload_sha256":"x","schema_sha256":"y","access":"execute","policy_scope":"s","approver":"a"}]}`,
		"run without session": `{"version":1,"approvals":[{"run_id":"r","member_id":"m1","call_id":"c1","tool":"shell","payload_sha256":"x","schema_sha256":"y","access":"execute","policy_scope":"s","approver":"a","expires_at":"2026-11-30T13:00:00Z"}]}`,
		"unknown key":         `{"version":1,"approvals":[],"auto_approve":true}`,
		"version":             `{"version":2,"approvals":[]}`,
	} {
		if _, err := ParseApprovalFile([]byte(text)); !errors.Is(err, ErrInvalidApprovalFile) {
			t.Errorf("%s: %v", name, err)
		}
	}
}

// Two secrets that overlap in the text are masked as one run: no part of either stays visible.
func TestRedactorMasksOverlappingSecretsWhole(t *testing.T) {
	r := NewRedactor("abcdef12", "ef123456")
	got := r.String("key=abcdef123456;")
	if got != "key="+Mask+";" {
		t.Fatalf("overlapping secrets: %q", got)
	}
	if got := r.String("xx abcdef12 yy ef123456 zz"); got != "xx "+Mask+" yy "+Mask+" zz" {
		t.Fatalf("separate secrets: %q", got)
	}
}

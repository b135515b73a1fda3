package main

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/assay-audit/assay/runtime/provider/reference"
)

func TestProviderServeServesWithFaultsUntilInterrupted(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	outR, outW := io.Pipe()
	var errOut strings.Builder
	code := make(chan int, 1)
	go func() {
		code <- run(ctx, []string{"provider", "serve", "--addr", "127.0.0.1:0", "--faults", "a:1:http_500",
			"--faults", "b:-1:replace_reply:not: json"}, IOStreams{In: strings.NewReader(""), Out: outW, ErrOut: &errOut})
		outW.Close()
	}()
	line, err := bufio.NewReader(outR).ReadString('\n')
	if err != nil {
		t.Fatalf("no base URL printed: %v", err)
	}
	go io.Copy(io.Discard, outR)
	base := strings.TrimSpace(line)
	if !strings.HasPrefix(base, "http://127.0.0.1:") || !strings.HasSuffix(base, "/v1") {
		t.Fatalf("base URL %q", base)
	}
	post := func(session string) (int, string) {
		body := `{"model":"` + reference.ModelID + `","messages":[{"role":"user","content":"` + reference.ContractPrefix +
			`{\"contract\":\"synthesis\",\"candidates\":[\"x\"]}"}]}`
		req, _ := http.NewRequest(http.MethodPost, base+"/chat/completions", strings.NewReader(body))
		req.Header.Set("X-Session-Id", session)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for i, want := range []int{200, 500, 200} {
		if got, body := post("run-1-a"); got != want {
			t.Fatalf("request %d of a: %d, want %d: %s", i, got, want, body)
		}
	}
	if _, body := post("run-1-b"); !strings.Contains(body, `"content":"not: json"`) {
		t.Fatalf("scripted reply with a colon not served: %s", body)
	}
	cancel()
	select {
	case c := <-code:
		if c != 0 {
			t.Fatalf("exit %d: %s", c, errOut.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("serve did not stop on interrupt")
	}
	if !strings.Contains(errOut.String(), "not a language model") {
		t.Fatalf("stderr %q", errOut.String())
	}
}

func TestProviderServeBadInput(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"provider", "serve", "--faults", "a:0:explode"}, "explode"},
		{[]string{"provider", "serve", "--faults", "a:zero:drop_usage"}, "turn"},
		{[]string{"provider", "serve", "--addr", "not-an-address"}, "listen"},
		{[]string{"provider", "serve", "--addr", "127.0.0.1:99999"}, "listen address"},
		{[]string{"provider", "serve", "--format", "xml"}, "--format"},
		{[]string{"provider", "serve", "extra"}, "takes no arguments"},
	} {
		r := runCLI(t, c.args...)
		if r.code != 2 {
			t.Fatalf("%v: exit %d, want 2 (%s)", c.args, r.code, r.stderr)
		}
		oneLine(t, r, c.want)
	}
}

// --effects-db naming a file that is not an effects database is refused before serving.
func TestProviderServeRefusesAForeignEffectsDB(t *testing.T) {
	foreign := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(foreign, []byte("not a database at all, just text that is long enough to look like a file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := runCLI(t, "provider", "serve", "--addr", "127.0.0.1:0", "--effects-db", foreign)
	if r.code != 2 {
		t.Fatalf("exit %d, want 2: %s", r.code, r.stderr)
	}
	oneLine(t, r, "not a reference effects database")
	if b, _ := os.ReadFile(foreign); !strings.HasPrefix(string(b), "not a database") {
		t.Fatal("the foreign file was changed")
	}
}

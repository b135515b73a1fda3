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
	faults, err := parseFaults("--faults", []string{"a:1:http_500", "b:-1:replace_reply:not: json"})
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		err := runProviderServe(ctx, &ProviderServeOptions{IO: IOStreams{In: strings.NewReader(""), Out: outW, ErrOut: &errOut},
			Addr: "127.0.0.1:0", Faults: faults, SessionHeader: reference.DefaultSessionHeader})
		code <- report(&errOut, err)
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
	// What the parser refuses: a fault that does not parse, an argument.
	for _, args := range [][]string{
		{"provider", "serve", "--faults", "a:0:explode"},
		{"provider", "serve", "--faults", "a:zero:drop_usage"},
		{"provider", "serve", "extra"},
	} {
		if got, code := parse(t, NewCmdProvider, args...); code != 2 || got != nil {
			t.Errorf("%q: exit %d, want 2 and nothing served", args, code)
		}
	}
	// What the provider refuses before serving.
	for _, c := range []struct {
		opts ProviderServeOptions
		want string
	}{
		{ProviderServeOptions{Addr: "not-an-address"}, `listen address "not-an-address"`},
		{ProviderServeOptions{Addr: "127.0.0.1:99999"}, "the port must be a number from 0 to 65535"},
		{ProviderServeOptions{Addr: "127.0.0.1:0", SessionHeader: "X Y"}, "session header"},
		{ProviderServeOptions{Addr: "127.0.0.1:0", Format: "xml"}, `--format "xml"`},
		{ProviderServeOptions{Addr: "127.0.0.1:0", Model: "ref model"}, `model id "ref model"`},
	} {
		r := call(t, "", func(ctx context.Context, io IOStreams) error {
			c.opts.IO = io
			return runProviderServe(ctx, &c.opts)
		})
		if r.code != 2 || r.stdout != "" {
			t.Errorf("%+v: exit %d, stdout %q (%s)", c.opts, r.code, r.stdout, r.stderr)
			continue
		}
		oneLine(t, r, c.want)
	}
	// A port another process holds is not bad input: it could not serve, exit 1.
	run, err := reference.StartOn(t.Context(), "127.0.0.1:0", reference.Config{})
	if err != nil {
		t.Fatal(err)
	}
	defer run.Close()
	taken := strings.TrimSuffix(strings.TrimPrefix(run.BaseURL(), "http://"), "/v1")
	r := call(t, "", func(ctx context.Context, io IOStreams) error {
		return runProviderServe(ctx, &ProviderServeOptions{IO: io, Addr: taken})
	})
	if r.code != 1 {
		t.Errorf("a taken port: exit %d, want 1 (%s)", r.code, r.stderr)
	}
}

// --effects-db naming a file that is not an effects database is refused before serving.
func TestProviderServeRefusesAForeignEffectsDB(t *testing.T) {
	foreign := filepath.Join(t.TempDir(), "notes.txt")
	if err := os.WriteFile(foreign, []byte("not a database at all, just text that is long enough to look like a file\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r := call(t, "", func(ctx context.Context, io IOStreams) error {
		return runProviderServe(ctx, &ProviderServeOptions{IO: io, Addr: "127.0.0.1:0", EffectsDB: foreign})
	})
	if r.code != 2 {
		t.Fatalf("exit %d, want 2: %s", r.code, r.stderr)
	}
	oneLine(t, r, "not a reference effects database")
	if b, _ := os.ReadFile(foreign); !strings.HasPrefix(string(b), "not a database") {
		t.Fatal("the foreign file was changed")
	}
}

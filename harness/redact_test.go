package harness

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"github.com/assay-audit/assay/internal/storetest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/reports"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

// splitReply returns a reply holding secret that the reference provider's stream splits across
// two content chunks (it streams content in three pieces of ceil(len/3) bytes), and the two parts
// of the secret the chunks carry, each at least five bytes long.
func splitReply(t *testing.T, secret string) (reply string, parts [2]string) {
	t.Helper()
	for pad := 0; pad < 64; pad++ {
		prefix := `{"status":"failed","error":"the deploy token is ` + strings.Repeat("x", pad)
		reply = prefix + secret + `, do not store it"}`
		size := (len(reply) + 2) / 3
		for _, cut := range []int{size, 2 * size} {
			at := cut - len(prefix)
			if at >= 5 && len(secret)-at >= 5 {
				return reply, [2]string{secret[:at], secret[at:]}
			}
		}
	}
	t.Fatal("no padding splits the secret")
	return "", [2]string{}
}

// A secret the provider streams split across two SSE chunks ("…sk-12" then "34…") appears nowhere
// in the output directory — not whole, not either part the chunks carried: not in the DuckDB file's
// bytes or any row of any table, not in an artifact file, the gateway's database, the report or the
// progress lines. The raw stream artifact is stored masked and still parses.
func TestSecretSplitAcrossSSEChunksIsStoredNowhere(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the matrix; skipped with -short")
	}
	secret := "tok-e2e-split-4f1c9a7b2d6e8035"
	t.Setenv("ASSAY_SPLIT_TEST_DEPLOY_TOKEN", secret)
	reply, parts := splitReply(t, secret)
	out := t.TempDir()
	var progress bytes.Buffer
	s := runMatrix(t, Options{OutDir: out, Formations: []string{"sequential"}, Language: caseLanguage(t), Stream: true, Progress: &progress,
		ReferenceFaults: []reference.Fault{{Member: "exec-1", Turn: 0, Kind: reference.FaultReplaceReply, Reply: reply}}})
	c := s.Cases[0]
	if c.Verdict.Verdict != "rejected" {
		t.Fatalf("verdict %s: exec-1 replied failed, the case must be rejected", c.Verdict.Verdict)
	}
	store, err := evidence.Open(context.Background(), s.StorePath, evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	rep, err := reports.Load(context.Background(), store, reports.Selection{RunIDs: []string{c.RunID}})
	if err != nil {
		t.Fatal(err)
	}
	store.Close()
	// Every report format is written and searched.
	for _, f := range reports.Formats() {
		if err := reports.WriteReportFile(filepath.Join(out, f.File), f, rep); err != nil {
			t.Fatal(err)
		}
	}

	needles := []string{secret, parts[0], parts[1]}
	found := func(where string, data []byte) {
		for _, n := range needles {
			if bytes.Contains(data, []byte(n)) {
				t.Errorf("%q (of the secret %q) found in %s", n, secret, where)
			}
		}
	}
	found("progress", progress.Bytes())
	files := 0
	err = filepath.WalkDir(out, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		data, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		files++
		found(path, data)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// DuckDB may compress what it stores: read every row of every table back as text too.
	storetest.EachValue(t, s.StorePath, func(table, text string) { found("table "+table, []byte(text)) })
	if files < 3 {
		t.Fatalf("%d files searched", files)
	}
	// The stream the secret was split in is stored masked: it still parses, and its joined content is
	// the reply with the secret masked; its digest is that of the masked bytes.
	store, err = evidence.Open(context.Background(), s.StorePath, evidence.OpenOptions{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	_, evs := storedEvents(t, out, c.RunID)
	streams := 0
	for _, ev := range evs {
		var p struct {
			Seq              int    `json:"seq"`
			Stream           bool   `json:"stream"`
			ResponseArtifact string `json:"response_artifact"`
		}
		if ev.Type != "provider_exchange" || ev.MemberID != "exec-1" || json.Unmarshal(ev.Payload, &p) != nil || p.Seq != 0 {
			continue
		}
		raw, err := store.Artifact(context.Background(), p.ResponseArtifact)
		if err != nil {
			t.Fatal(err)
		}
		if sum := sha256.Sum256(raw); !p.Stream || hex.EncodeToString(sum[:]) != p.ResponseArtifact {
			t.Fatalf("stream %v, artifact %s is not the digest of its bytes", p.Stream, p.ResponseArtifact)
		}
		if got, want := joinedContent(t, raw), strings.Replace(reply, secret, "[REDACTED]", 1); got != want {
			t.Fatalf("stored stream joins to %q, want %q", got, want)
		}
		streams++
	}
	if streams != 1 {
		t.Fatalf("%d streamed responses of exec-1's first request found, want 1", streams)
	}
}

// joinedContent joins the delta content of every chunk of a stored SSE stream.
func joinedContent(t *testing.T, raw []byte) string {
	t.Helper()
	var b strings.Builder
	for _, line := range strings.Split(string(raw), "\n") {
		data, ok := strings.CutPrefix(line, "data: ")
		if !ok || data == "[DONE]" {
			continue
		}
		var chunk struct {
			Choices []struct {
				Delta struct {
					Content *string `json:"content"`
				} `json:"delta"`
			} `json:"choices"`
		}
		if err := json.Unmarshal([]byte(data), &chunk); err != nil {
			t.Fatalf("stored stream does not parse: %v: %s", err, data)
		}
		for _, ch := range chunk.Choices {
			if ch.Delta.Content != nil {
				b.WriteString(*ch.Delta.Content)
			}
		}
	}
	return b.String()
}

package reference_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/provider/reference"
)

const remotePutToolJSON = `{"type":"function","function":{"name":"remote_put","parameters":{"type":"object"}}}`

// effectsCall sends one request to the effect service and returns status and body.
func effectsCall(t *testing.T, run *reference.Running, method, key, body string, header map[string]string) (int, []byte) {
	t.Helper()
	var rd io.Reader
	if body != "" {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, run.BaseURL()+"/effects/"+url.PathEscape(key), rd)
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, key, err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, raw
}

func decodeReceipt(t *testing.T, raw []byte) reference.EffectReceipt {
	t.Helper()
	var rc reference.EffectReceipt
	if err := json.Unmarshal(raw, &rc); err != nil {
		t.Fatalf("receipt %s: %v", raw, err)
	}
	return rc
}

func openReader(t *testing.T, path string) *reference.EffectsReader {
	t.Helper()
	r, err := reference.OpenEffectsReader(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.Close() })
	return r
}

func TestEffectServiceCommitsOncePerKey(t *testing.T) {
	db := filepath.Join(t.TempDir(), "effects.db")
	run := startReference(t, reference.Config{EffectsDB: db})
	key := "run-1:exec-1:r1-call_abc/with slash"
	body := `{"name":"double/exec-1","value":"v1"}`

	if status, raw := effectsCall(t, run, http.MethodGet, key, "", nil); status != http.StatusNotFound || !strings.Contains(string(raw), "receipt_not_found") {
		t.Fatalf("GET before any PUT: %d %s", status, raw)
	}
	status, raw := effectsCall(t, run, http.MethodPut, key, body, map[string]string{"Idempotency-Key": key})
	if status != http.StatusCreated {
		t.Fatalf("first PUT: %d %s", status, raw)
	}
	first := decodeReceipt(t, raw)
	if first.IdempotencyKey != key || !first.Committed || first.Puts != 1 || !strings.HasPrefix(first.Reference, "ref-") ||
		first.Name != "double/exec-1" || len(first.PayloadSHA256) != 64 || first.Time.IsZero() {
		t.Fatalf("first receipt %+v", first)
	}
	// A repeated PUT of the key (a retry by someone) commits nothing and returns the receipt.
	status, raw = effectsCall(t, run, http.MethodPut, key, body, nil)
	if status != http.StatusOK {
		t.Fatalf("second PUT: %d %s", status, raw)
	}
	second := decodeReceipt(t, raw)
	if second.Reference != first.Reference || !second.Time.Equal(first.Time) || second.Puts != 2 {
		t.Fatalf("second receipt %+v, first %+v", second, first)
	}
	// The same key for another payload: refused, counted, nothing committed.
	status, raw = effectsCall(t, run, http.MethodPut, key, `{"name":"double/exec-1","value":"v2"}`, nil)
	if status != http.StatusUnprocessableEntity || !strings.Contains(string(raw), "idempotency_key_reused") {
		t.Fatalf("conflicting PUT: %d %s", status, raw)
	}
	status, raw = effectsCall(t, run, http.MethodGet, key, "", nil)
	if got := decodeReceipt(t, raw); status != http.StatusOK || got.Puts != 3 || got.Reference != first.Reference {
		t.Fatalf("GET: %d %+v", status, got)
	}
	r := openReader(t, db)
	value, by, found, err := r.Value(t.Context(), "double/exec-1")
	if err != nil || !found || value != "v1" || by != key {
		t.Fatalf("committed value %q by %q found %v err %v", value, by, found, err)
	}
}

func TestEffectServiceRefusesMalformedPuts(t *testing.T) {
	run := startReference(t, reference.Config{})
	for _, tc := range []struct {
		name, key, body string
		header          map[string]string
		want            string
	}{
		{"header names another key", "k1", `{"name":"n","value":"v"}`, map[string]string{"Idempotency-Key": "k2"}, "idempotency_key_mismatch"},
		{"not JSON", "k1", `name=v`, nil, "invalid_body"},
		{"missing value", "k1", `{"name":"n"}`, nil, "missing field"},
		{"extra field", "k1", `{"name":"n","value":"v","x":1}`, nil, "unknown field"},
		{"value not a string", "k1", `{"name":"n","value":3}`, nil, "not a string"},
		{"empty name", "k1", `{"name":" ","value":"v"}`, nil, "empty"},
		{"control character in key", "k\x01", `{"name":"n","value":"v"}`, nil, "control"},
		{"key too long", strings.Repeat("k", reference.MaxEffectKeyBytes+1), `{"name":"n","value":"v"}`, nil, "limit"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			status, raw := effectsCall(t, run, http.MethodPut, tc.key, tc.body, tc.header)
			if status != http.StatusBadRequest || !strings.Contains(string(raw), tc.want) {
				t.Fatalf("%d %s, want 400 naming %q", status, raw, tc.want)
			}
		})
	}
	if status, raw := effectsCall(t, run, http.MethodGet, "k1", "", nil); status != http.StatusNotFound {
		t.Fatalf("a refused PUT committed something: %d %s", status, raw)
	}
}

func TestEffectReceiptsOutliveTheServer(t *testing.T) {
	db := filepath.Join(t.TempDir(), "out", "effects.db")
	run, err := reference.Start(t.Context(), reference.Config{EffectsDB: db})
	if err != nil {
		t.Fatal(err)
	}
	status, raw := effectsCall(t, run, http.MethodPut, "run-1:a:call_1", `{"name":"n","value":"v"}`, nil)
	if status != http.StatusCreated {
		t.Fatalf("PUT: %d %s", status, raw)
	}
	committed := decodeReceipt(t, raw)
	if err := run.Close(); err != nil {
		t.Fatal(err)
	}
	// The file alone answers the lookup: the backend reconciliation uses when the provider is gone.
	r := openReader(t, db)
	var backend effect.Backend = r
	rc, found, err := backend.Lookup(t.Context(), effect.Query{IdempotencyKey: "run-1:a:call_1"})
	if err != nil || !found || !rc.Committed || rc.Reference != committed.Reference || rc.IdempotencyKey != "run-1:a:call_1" ||
		!rc.Time.Equal(committed.Time) {
		t.Fatalf("lookup %+v found %v err %v, committed %+v", rc, found, err, committed)
	}
	if _, found, err := backend.Lookup(t.Context(), effect.Query{IdempotencyKey: "run-1:a:call_2"}); found || err != nil {
		t.Fatalf("lookup of a key never PUT: found %v err %v", found, err)
	}
	// A new process serving the same file finds the receipt and does not commit again.
	again := startReference(t, reference.Config{EffectsDB: db})
	status, raw = effectsCall(t, again, http.MethodPut, "run-1:a:call_1", `{"name":"n","value":"v"}`, nil)
	if got := decodeReceipt(t, raw); status != http.StatusOK || got.Puts != 2 || got.Reference != committed.Reference {
		t.Fatalf("PUT to the new server: %d %s", status, raw)
	}
}

func TestEffectsReaderRefusesWhatIsNotAnEffectsDatabase(t *testing.T) {
	dir := t.TempDir()
	_, err := reference.OpenEffectsReader(t.Context(), filepath.Join(dir, "missing.db"))
	if !errors.Is(err, reference.ErrNoEffectsDB) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("missing file: %v", err)
	}
	text := filepath.Join(dir, "notes.txt")
	if err := os.WriteFile(text, []byte("not a database, but long enough to be read as one by sqlite\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := reference.OpenEffectsReader(t.Context(), text); !errors.Is(err, reference.ErrNotEffectsDB) {
		t.Fatalf("text file: %v", err)
	}
	if _, err := reference.Start(t.Context(), reference.Config{EffectsDB: text}); !errors.Is(err, reference.ErrNotEffectsDB) {
		t.Fatalf("Start on a text file: %v", err)
	}
}

// Two processes serving one effects file, each PUTting the same key concurrently: one commit.
func TestConcurrentPutsFromTwoServersCommitOnce(t *testing.T) {
	db := filepath.Join(t.TempDir(), "effects.db")
	runs := []*reference.Running{startReference(t, reference.Config{EffectsDB: db}), startReference(t, reference.Config{EffectsDB: db})}
	const n = 16
	statuses := make([]int, n)
	refs := make([]string, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			status, raw := effectsCall(t, runs[i%2], http.MethodPut, "run-1:a:call_x", `{"name":"n","value":"v"}`, nil)
			statuses[i] = status
			if status == http.StatusCreated || status == http.StatusOK {
				refs[i] = decodeReceipt(t, raw).Reference
			}
		}()
	}
	wg.Wait()
	created := 0
	for i, s := range statuses {
		switch s {
		case http.StatusCreated:
			created++
		case http.StatusOK:
		default:
			t.Fatalf("PUT %d: status %d", i, s)
		}
		if refs[i] != refs[0] {
			t.Fatalf("PUT %d saw reference %s, PUT 0 %s", i, refs[i], refs[0])
		}
	}
	rc, found, err := openReader(t, db).Receipt(t.Context(), "run-1:a:call_x")
	if created != 1 || !found || err != nil || rc.Puts != n {
		t.Fatalf("created %d times; receipt %+v found %v err %v", created, rc, found, err)
	}
}

// publishTurn drives one executor session through writes and its remote_put call, returning the
// remote_put call's id and arguments.
func publishTurn(t *testing.T, run *reference.Running, session string) (id, arguments string) {
	t.Helper()
	assign := reference.FormatAssignment(doubleAssignment())
	tools := writeFileToolJSON + "," + remotePutToolJSON
	status, raw := post(t, run, session, userTurn(assign+"\n"+contractLine(`"contract":"completion","member_id":"exec-1"`), tools))
	if status != http.StatusOK {
		t.Fatalf("turn 0: %d %s", status, raw)
	}
	writes := decodeCompletion(t, raw).Choices[0].Message.ToolCalls
	if len(writes) != 2 || writes[0].Function.Name != "write_file" {
		t.Fatalf("turn 0 should write two files: %s", raw)
	}
	msgs := []string{`{"role":"user","content":` + jsonString(assign+"\n"+contractLine(`"contract":"completion","member_id":"exec-1"`)) + `}`}
	callsJSON, _ := json.Marshal(writes)
	msgs = append(msgs, `{"role":"assistant","content":null,"tool_calls":`+string(callsJSON)+`}`)
	for _, w := range writes {
		msgs = append(msgs, `{"role":"tool","tool_call_id":`+jsonString(w.ID)+`,"content":"wrote it"}`)
	}
	status, raw = post(t, run, session, fmt.Sprintf(`{"model":%q,"messages":[%s],"tools":[%s]}`, reference.ModelID, strings.Join(msgs, ","), tools))
	if status != http.StatusOK {
		t.Fatalf("turn 1: %d %s", status, raw)
	}
	c := decodeCompletion(t, raw).Choices[0]
	if c.FinishReason != "tool_calls" || len(c.Message.ToolCalls) != 1 || c.Message.ToolCalls[0].Function.Name != reference.RemotePutTool {
		t.Fatalf("turn 1 should publish with remote_put: %s", raw)
	}
	put := c.Message.ToolCalls[0]
	// After the put's result, the completion reply.
	putJSON, _ := json.Marshal([]rawCall{put})
	done := append(msgs, `{"role":"assistant","content":null,"tool_calls":`+string(putJSON)+`}`,
		`{"role":"tool","tool_call_id":`+jsonString(put.ID)+`,"content":"committed"}`)
	status, raw = post(t, run, session, fmt.Sprintf(`{"model":%q,"messages":[%s],"tools":[%s]}`, reference.ModelID, strings.Join(done, ","), tools))
	if got := content(t, raw); status != http.StatusOK || got != `{"status":"done","files":["double.go","double_test.go"]}` {
		t.Fatalf("after the put: %d %q", status, got)
	}
	return put.ID, put.Function.Arguments
}

func TestExecutorPublishesWithRemotePutAfterWriting(t *testing.T) {
	run := startReference(t, reference.Config{})
	id, args := publishTurn(t, run, "run-1-exec-1")
	if !strings.HasPrefix(id, "call_") || len(id) != len("call_")+12 {
		t.Fatalf("call id %q", id)
	}
	if args != `{"name":"double/exec-1","value":"double/go/double.go,double_test.go"}` {
		t.Fatalf("arguments %s", args)
	}
	// Without remote_put on offer, the executor is done after its writes (as before).
	assign := reference.FormatAssignment(doubleAssignment())
	body := fmt.Sprintf(`{"model":%q,"messages":[{"role":"user","content":%s},{"role":"assistant","content":null,"tool_calls":[{"id":"c","type":"function","function":{"name":"write_file","arguments":"{}"}}]},{"role":"tool","tool_call_id":"c","content":"wrote"}],"tools":[%s]}`,
		reference.ModelID, jsonString(assign), writeFileToolJSON)
	if status, raw := post(t, run, "run-1-exec-2", body); status != http.StatusOK || content(t, raw) != `{"status":"done","files":["double.go","double_test.go"]}` {
		t.Fatalf("without remote_put: %d %s", status, raw)
	}
	// A failed write is reported, not published.
	failedBody := strings.Replace(body, `"content":"wrote"`, `"content":"error: disk full"`, 1)
	failedBody = strings.Replace(failedBody, `"tools":[`+writeFileToolJSON, `"tools":[`+writeFileToolJSON+","+remotePutToolJSON, 1)
	if status, raw := post(t, run, "run-1-exec-3", failedBody); status != http.StatusOK || !strings.Contains(content(t, raw), `"status":"failed"`) {
		t.Fatalf("failed write: %d %s", status, raw)
	}
}

func TestHTTP500AfterCommitFault(t *testing.T) {
	db := filepath.Join(t.TempDir(), "effects.db")
	run := startReference(t, reference.Config{EffectsDB: db, Faults: []reference.Fault{{Member: "exec-1", Turn: 1, Kind: reference.FaultHTTP500AfterCommit}}})
	id, args := publishTurn(t, run, "run-1-exec-1")
	key := "run-1:exec-1:r1-" + id // the runtime's call id prefixes the model's

	status, raw := effectsCall(t, run, http.MethodPut, key, args, map[string]string{"Idempotency-Key": key})
	if status != http.StatusInternalServerError || !strings.Contains(string(raw), "reference_fault_http_500_after_commit") {
		t.Fatalf("faulted PUT: %d %s", status, raw)
	}
	// It committed: the receipt exists, with one PUT.
	rc, found, err := openReader(t, db).Receipt(t.Context(), key)
	if err != nil || !found || !rc.Committed || rc.Puts != 1 {
		t.Fatalf("receipt after the 500: %+v found %v err %v", rc, found, err)
	}
	// A retry would get the receipt, and the count would show it.
	status, raw = effectsCall(t, run, http.MethodPut, key, args, nil)
	if got := decodeReceipt(t, raw); status != http.StatusOK || got.Puts != 2 {
		t.Fatalf("repeated PUT: %d %s", status, raw)
	}
	// Other members, other turns and keys of calls this server never issued are not faulted.
	otherID, otherArgs := publishTurn(t, run, "run-1-exec-2")
	if status, raw := effectsCall(t, run, http.MethodPut, "run-1:exec-2:r1-"+otherID, otherArgs, nil); status != http.StatusCreated {
		t.Fatalf("another member's PUT: %d %s", status, raw)
	}
	if status, raw := effectsCall(t, run, http.MethodPut, "run-1:exec-1:call_000000000000", args, nil); status != http.StatusCreated {
		t.Fatalf("a key no reply issued: %d %s", status, raw)
	}
}

func TestParseFaultHTTP500AfterCommit(t *testing.T) {
	f, err := reference.ParseFault("exec-1:1:http_500_after_commit")
	if err != nil || f != (reference.Fault{Member: "exec-1", Turn: 1, Kind: reference.FaultHTTP500AfterCommit}) {
		t.Fatalf("%+v %v", f, err)
	}
	if _, err := reference.ParseFault("exec-1:1:http_500_after_commit:x"); !errors.Is(err, reference.ErrInvalidConfig) {
		t.Fatalf("argument accepted: %v", err)
	}
	found := false
	for _, k := range reference.FaultKinds() {
		found = found || k == reference.FaultHTTP500AfterCommit
	}
	if !found {
		t.Fatal("FaultKinds does not list http_500_after_commit")
	}
}

package evidence

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

func TestRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	s := mustOpen(t, path, OpenOptions{Command: "assay matrix run"})
	env := testEnvelope(ModeLive)
	const run = "run-2024.01_a"
	if err := s.OpenRun(ctx, run, env, ""); err != nil {
		t.Fatalf("OpenRun: %v", err)
	}

	// Eight members append concurrently, each chaining its events causally.
	const members, perMember = 8, 20
	var wg sync.WaitGroup
	seqs := make([][]int64, members)
	errs := make(chan error, members)
	for m := 0; m < members; m++ {
		wg.Add(1)
		go func(m int) {
			defer wg.Done()
			parent := int64(0)
			for i := 0; i < perMember; i++ {
				se, err := s.AppendEvent(ctx, run, Event{
					Type: "note", MemberID: "m" + string(rune('a'+m)), SessionID: run + "-m" + string(rune('a'+m)),
					Parent: parent, Payload: payload(`{"member": %d, "i": %d, "note": "z<&>"}`, m, i),
				})
				if err != nil {
					errs <- err
					return
				}
				if se.Parent != parent || (parent != 0 && se.Seq <= parent) {
					errs <- errors.New("parent not kept or seq not after parent")
					return
				}
				seqs[m] = append(seqs[m], se.Seq)
				parent = se.Seq
			}
		}(m)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("concurrent AppendEvent: %v", err)
	}

	// A payload is stored canonically; a non-UTC time is stored as UTC micros.
	at := time.Date(2025, 3, 4, 5, 6, 7, 123456789, time.FixedZone("X", 3600))
	last, err := s.AppendEvent(ctx, run, Event{Type: "member_finished", Time: at, Parent: 1,
		Payload: json.RawMessage(` {"b": 1, "a": [1, 2.50, "\u00e9"]} `)})
	if err != nil {
		t.Fatalf("AppendEvent: %v", err)
	}
	if want := `{"a":[1,2.5,"é"],"b":1}`; string(last.Payload) != want {
		t.Errorf("stored payload %s, want canonical %s", last.Payload, want)
	}
	if want := time.Date(2025, 3, 4, 4, 6, 7, 123456000, time.UTC); !last.Time.Equal(want) || last.Time.Location() != time.UTC {
		t.Errorf("stored time %v, want %v", last.Time, want)
	}

	events, err := s.Events(ctx, run)
	if err != nil {
		t.Fatalf("Events: %v", err)
	}
	if len(events) != members*perMember+1 {
		t.Fatalf("got %d events, want %d", len(events), members*perMember+1)
	}
	prev := ZeroHash
	for i, e := range events {
		if e.Seq != int64(i+1) {
			t.Fatalf("event %d has seq %d: not gap-free", i+1, e.Seq)
		}
		if e.PrevHash != prev {
			t.Fatalf("event %d prev_hash does not link", e.Seq)
		}
		h, err := EventHash(prev, e)
		if err != nil || h != e.Hash {
			t.Fatalf("event %d: recomputed hash %s (err %v) != stored %s", e.Seq, h, err, e.Hash)
		}
		prev = e.Hash
	}
	if diff := cmp.Diff(last, events[len(events)-1]); diff != "" {
		t.Errorf("Events() last differs from AppendEvent's return (-append +events):\n%s", diff)
	}
	for m, ss := range seqs {
		for i := 1; i < len(ss); i++ {
			if ss[i] <= ss[i-1] {
				t.Fatalf("member %d seqs not monotonic: %v", m, ss)
			}
		}
	}

	small := []byte("package cases\n\nfunc Double(x int) int { return 2 * x }\n")
	large := largeData(InlineLimit+1, 7)
	smallDigest, err := s.PutArtifact(ctx, run, "cases/double.go", "text/x-go", small)
	if err != nil {
		t.Fatalf("PutArtifact small: %v", err)
	}
	largeDigest, err := s.PutArtifact(ctx, run, "provider/response/exec-1/0", "application/octet-stream", large)
	if err != nil {
		t.Fatalf("PutArtifact large: %v", err)
	}
	if _, err := s.PutArtifact(ctx, run, "empty", "", nil); err != nil {
		t.Fatalf("PutArtifact empty: %v", err)
	}
	binary := largeData(InlineLimit, 5) // exactly at the limit: inline, not UTF-8
	binaryDigest, err := s.PutArtifact(ctx, run, "provider/request/exec-1/0", "application/octet-stream", binary)
	if err != nil {
		t.Fatalf("PutArtifact binary: %v", err)
	}
	if got, err := s.Artifact(ctx, binaryDigest); err != nil || !bytes.Equal(got, binary) {
		t.Fatalf("binary inline artifact round trip: %d bytes, %v", len(got), err)
	}
	if s.ArtifactPath(binaryDigest) == "" {
		t.Fatal("ArtifactPath of a valid digest is empty")
	} else if _, err := os.Stat(s.ArtifactPath(binaryDigest)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("artifact of exactly InlineLimit bytes must be inline: %v", err)
	}
	if smallDigest != digestOfBytes(small) || largeDigest != digestOfBytes(large) {
		t.Fatalf("digests are not SHA-256 of content")
	}
	onDisk, err := os.ReadFile(s.ArtifactPath(largeDigest))
	if err != nil || !bytes.Equal(onDisk, large) {
		t.Fatalf("large artifact not stored as file %s: %v", s.ArtifactPath(largeDigest), err)
	}
	if _, err := os.Stat(s.ArtifactPath(smallDigest)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("small artifact must be inline, found file: %v", err)
	}
	for name, want := range map[string][]byte{smallDigest: small, largeDigest: large} {
		got, err := s.Artifact(ctx, name)
		if err != nil || !bytes.Equal(got, want) {
			t.Fatalf("Artifact(%s): %d bytes, err %v", name, len(got), err)
		}
	}

	usage := []UsageRow{
		{MemberID: "ma", SessionID: run + "-ma", Source: SourceWire, State: UsageReported, Requests: 2, PromptTokens: i64(10), CompletionTokens: i64(5), TotalTokens: i64(15), CachedTokens: i64(0)},
		{MemberID: "ma", SessionID: run + "-ma", Source: SourceStore, State: UsageReported, Requests: 2, PromptTokens: i64(10), CompletionTokens: i64(5), TotalTokens: i64(15)},
		{MemberID: "ma", SessionID: run + "-ma", Source: SourceGateway, State: UsageReported, Requests: 2, PromptTokens: i64(10), CompletionTokens: i64(5), TotalTokens: i64(15)},
		{MemberID: "mb", SessionID: run + "-mb", Source: SourceWire, State: UsageUnknown, Requests: 1},
	}
	if err := s.RecordUsage(ctx, run, usage...); err != nil {
		t.Fatalf("RecordUsage: %v", err)
	}
	verdicts := ReconcileUsage(usage)
	if err := s.RecordUsageVerdicts(ctx, run, verdicts); err != nil {
		t.Fatalf("RecordUsageVerdicts: %v", err)
	}
	checks := []Check{
		{Name: "files_exist", Required: true, Status: CheckPassed, Detail: "1 file", Evidence: json.RawMessage(`{"files": ["cases/double.go"]}`)},
		{Name: "tests", Required: true, Status: CheckPassed, Detail: "ok"},
		{Name: "lint", Required: false, Status: CheckFailed, Detail: "style"},
	}
	for _, c := range checks {
		if err := s.RecordCheck(ctx, run, c); err != nil {
			t.Fatalf("RecordCheck %s: %v", c.Name, err)
		}
	}
	fin, err := s.Finalize(ctx, run, Verdict{Verdict: VerdictAccepted})
	if err != nil {
		t.Fatalf("Finalize: %v", err)
	}
	if fin.Verdict.Verdict != VerdictAccepted || fin.EventCount != int64(len(events)+len(checks)+1) || !isDigest(fin.TerminalHash) {
		t.Fatalf("Finalize = %+v", fin)
	}
	// RecordCheck and Finalize chained each check and the verdict into the trace.
	after, err := s.Events(ctx, run)
	if err != nil || int64(len(after)) != fin.EventCount {
		t.Fatalf("Events after Finalize: %d, %v", len(after), err)
	}
	wantTail := []string{
		`{"detail_sha256":"` + digestOf("1 file") + `","evidence_sha256":"` + digestOf(`{"files":["cases/double.go"]}`) + `","name":"files_exist","required":true,"status":"passed"}`,
		`{"detail_sha256":"` + digestOf("ok") + `","evidence_sha256":null,"name":"tests","required":true,"status":"passed"}`,
		`{"detail_sha256":"` + digestOf("style") + `","evidence_sha256":null,"name":"lint","required":false,"status":"failed"}`,
		`{"reasons":[],"requested_verdict":"accepted","status":"finalized","verdict":"accepted"}`,
	}
	for i, e := range after[len(events):] {
		typ := EventCheckRecorded
		if i == len(checks) {
			typ = EventRunFinalized
		}
		if e.Type != typ || string(e.Payload) != wantTail[i] || e.MemberID != "" || e.Parent != 0 || e.PrevHash != after[len(events)+i-1].Hash {
			t.Errorf("event %d = %s %s, want %s %s chained to its predecessor", e.Seq, e.Type, e.Payload, typ, wantTail[i])
		}
	}
	if sum, err := s.Run(ctx, run); err != nil || sum.TerminalVersion != TerminalV5 || !isDigest(sum.AdmissionHash) {
		t.Fatalf("finalized run: terminal version %d, admission hash %q, %v", sum.TerminalVersion, sum.AdmissionHash, err)
	}
	vs, err := s.Verify(ctx, run)
	if err != nil {
		t.Fatalf("Verify: %v", err)
	}
	if len(vs) != 1 || vs[0].Status != VerifyOK || vs[0].FirstBadSeq != 0 {
		t.Fatalf("Verify = %+v, want ok", vs)
	}
	mustClose(t, s)

	// Reopened read-only, the summary describes exactly what was recorded.
	ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
	vs, err = ro.Verify(ctx)
	if err != nil || len(vs) != 1 || vs[0].Status != VerifyOK {
		t.Fatalf("read-only Verify = %+v, %v", vs, err)
	}
	sum, err := ro.Run(ctx, run)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	wantDigest, _ := env.Digest()
	if sum.Status != StatusFinalized || sum.EventCount != fin.EventCount || sum.TerminalHash != fin.TerminalHash ||
		sum.EnvelopeDigest != wantDigest || sum.FinalizedAt == nil || sum.Verdict == nil || sum.Verdict.Verdict != VerdictAccepted {
		t.Errorf("summary = %+v", sum)
	}
	if diff := cmp.Diff(env, sum.Envelope); diff != "" {
		t.Errorf("envelope round trip (-want +got):\n%s", diff)
	}
	wantChecks := []Check{checks[0], checks[2], checks[1]} // ordered by name
	wantChecks[0].Evidence = json.RawMessage(`{"files":["cases/double.go"]}`)
	if diff := cmp.Diff(wantChecks, sum.Checks); diff != "" {
		t.Errorf("checks (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(usage, sum.Usage); diff != "" {
		t.Errorf("usage (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(verdicts, sum.UsageVerdicts, cmpopts.EquateEmpty()); diff != "" {
		t.Errorf("usage verdicts (-want +got):\n%s", diff)
	}
	if len(sum.Artifacts) != 4 || sum.Artifacts[3].Name != "provider/response/exec-1/0" || sum.Artifacts[3].Storage != StorageFile ||
		sum.Artifacts[3].Size != int64(len(large)) || sum.Artifacts[2].Storage != StorageInline || sum.Artifacts[0].Name != "cases/double.go" || sum.Artifacts[0].Storage != StorageInline {
		t.Errorf("artifact links = %+v", sum.Artifacts)
	}
	if got, err := ro.Artifact(ctx, largeDigest); err != nil || !bytes.Equal(got, large) {
		t.Errorf("read-only Artifact(large): %v", err)
	}
	runs, err := ro.Runs(ctx)
	if err != nil || len(runs) != 1 || runs[0].RunID != run {
		t.Errorf("Runs = %+v, %v", runs, err)
	}
}

func TestRunsOrderAndCorrections(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	ids := []string{"zz-first", "aa-second", "mm-third"}
	for _, id := range ids {
		if err := s.OpenRun(ctx, id, testEnvelope(ModeLive), ""); err != nil {
			t.Fatalf("OpenRun %s: %v", id, err)
		}
	}
	if err := s.OpenRun(ctx, "aa-second", testEnvelope(ModeLive), ""); !errors.Is(err, ErrRunExists) {
		t.Errorf("duplicate OpenRun: %v, want ErrRunExists", err)
	}
	if err := s.OpenRun(ctx, "fix-1", testEnvelope(ModeLive), "no-such-run"); !errors.Is(err, ErrNoRun) {
		t.Errorf("correcting a missing run: %v, want ErrNoRun", err)
	}
	if err := s.OpenRun(ctx, "fix-1", testEnvelope(ModeLive), "zz-first"); err != nil {
		t.Fatalf("OpenRun correction: %v", err)
	}
	runs, err := s.Runs(ctx)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, r := range runs {
		got = append(got, r.RunID)
		if r.Status != StatusOpen || r.Verdict != nil || r.FinalizedAt != nil {
			t.Errorf("new run %s = %+v", r.RunID, r)
		}
	}
	if diff := cmp.Diff(append(ids, "fix-1"), got); diff != "" {
		t.Errorf("Runs order (-want +got):\n%s", diff)
	}
	if runs[3].CorrectsRunID != "zz-first" {
		t.Errorf("CorrectsRunID = %q", runs[3].CorrectsRunID)
	}
	if _, err := s.Run(ctx, "nope"); !errors.Is(err, ErrNoRun) {
		t.Errorf("Run(nope) = %v, want ErrNoRun", err)
	}
	if _, err := s.Events(ctx, "nope"); !errors.Is(err, ErrNoRun) {
		t.Errorf("Events(nope) = %v, want ErrNoRun", err)
	}
	if _, err := s.Verify(ctx, "nope"); !errors.Is(err, ErrNoRun) {
		t.Errorf("Verify(nope) = %v, want ErrNoRun", err)
	}
	vs, err := s.Verify(ctx)
	if err != nil || len(vs) != 4 {
		t.Fatalf("Verify all = %+v, %v", vs, err)
	}
	for _, v := range vs {
		if v.Status != VerifyUnfinalized {
			t.Errorf("open run %s verifies as %s, want unfinalized", v.RunID, v.Status)
		}
	}
}

func TestOpenRunValidation(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	mutate := func(f func(*Envelope)) Envelope {
		e := testEnvelope(ModeLive)
		f(&e)
		return e
	}
	cases := []struct {
		name  string
		runID string
		env   Envelope
		kind  error
		field string
	}{
		{"empty run id", "", testEnvelope(ModeLive), ErrInvalidArgument, "run_id"},
		{"run id with slash", "a/b", testEnvelope(ModeLive), ErrInvalidArgument, "run_id"},
		{"run id too long", string(bytes.Repeat([]byte("a"), 129)), testEnvelope(ModeLive), ErrInvalidArgument, "run_id"},
		{"no tenant", "r1", mutate(func(e *Envelope) { e.Tenant = "" }), ErrInvalidEnvelope, "tenant"},
		{"manifest not hex", "r1", mutate(func(e *Envelope) { e.ManifestDigest = "abc" }), ErrInvalidEnvelope, "manifest_digest"},
		{"manifest uppercase", "r1", mutate(func(e *Envelope) { e.ManifestDigest = digestOf("x")[:63] + "A" }), ErrInvalidEnvelope, "manifest_digest"},
		{"bad mode", "r1", mutate(func(e *Envelope) { e.Mode = "replay" }), ErrInvalidEnvelope, "mode"},
		{"bad policy digest", "r1", mutate(func(e *Envelope) { e.PolicyDigest = "zz" }), ErrInvalidEnvelope, "policy_digest"},
		{"no fingerprint", "r1", mutate(func(e *Envelope) { e.EnvironmentFingerprint = "" }), ErrInvalidEnvelope, "environment_fingerprint"},
		{"empty entropy source", "r1", mutate(func(e *Envelope) { e.EntropySources = []string{""} }), ErrInvalidEnvelope, "entropy_sources"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			wantFieldError(t, s.OpenRun(ctx, tc.runID, tc.env, ""), tc.kind, tc.field)
		})
	}
	runs, err := s.Runs(ctx)
	if err != nil || len(runs) != 0 {
		t.Errorf("refused runs were stored: %+v, %v", runs, err)
	}
}

func TestInvalidEventsRefused(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	const run = "r-events"
	if err := s.OpenRun(ctx, run, testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name  string
		ev    Event
		field string
	}{
		{"malformed payload JSON", Event{Type: "tool_call", Payload: json.RawMessage(`{"a":`)}, "payload"},
		{"payload not an object", Event{Type: "tool_call", Payload: json.RawMessage(`[1, 2]`)}, "payload"},
		{"payload a string", Event{Type: "tool_call", Payload: json.RawMessage(`"x"`)}, "payload"},
		{"payload missing", Event{Type: "tool_call"}, "payload"},
		{"payload with duplicate keys", Event{Type: "tool_call", Payload: json.RawMessage(`{"a":1,"a":2}`)}, "payload"},
		{"empty type", Event{Type: "", Payload: json.RawMessage(`{}`)}, "type"},
		{"type not [a-z_]", Event{Type: "Tool-Call", Payload: json.RawMessage(`{}`)}, "type"},
		{"parent equal to new seq", Event{Type: "step", Parent: 1, Payload: json.RawMessage(`{}`)}, "parent"},
		{"parent after new seq", Event{Type: "step", Parent: 7, Payload: json.RawMessage(`{}`)}, "parent"},
		{"negative parent", Event{Type: "step", Parent: -1, Payload: json.RawMessage(`{}`)}, "parent"},
		{"member id not UTF-8", Event{Type: "step", MemberID: "\xff", Payload: json.RawMessage(`{}`)}, "member_id"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			_, err := s.AppendEvent(ctx, run, tc.ev)
			wantFieldError(t, err, ErrInvalidEvent, tc.field)
		})
	}
	events, err := s.Events(ctx, run)
	if err != nil || len(events) != 0 {
		t.Fatalf("refused events were stored: %d, %v", len(events), err)
	}
	// After a valid first event, parent 1 is allowed for the second.
	if _, err := s.AppendEvent(ctx, run, Event{Type: "a", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if se, err := s.AppendEvent(ctx, run, Event{Type: "b", Parent: 1, Payload: json.RawMessage(`{}`)}); err != nil || se.Seq != 2 {
		t.Fatalf("second event: %+v, %v", se, err)
	}
}

func TestArtifactRefusals(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	const run = "r-art"
	if err := s.OpenRun(ctx, run, testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	d, err := s.PutArtifact(ctx, run, "a.txt", "text/plain", []byte("one"))
	if err != nil {
		t.Fatal(err)
	}
	if again, err := s.PutArtifact(ctx, run, "a.txt", "text/plain", []byte("one")); err != nil || again != d {
		t.Errorf("re-linking identical content: %s, %v", again, err)
	}
	if _, err := s.PutArtifact(ctx, run, "a.txt", "text/plain", []byte("two")); !errors.Is(err, ErrArtifactNameTaken) {
		t.Errorf("relinking a name to other content: %v, want ErrArtifactNameTaken", err)
	}
	if got, err := s.Artifact(ctx, d); err != nil || string(got) != "one" {
		t.Errorf("artifact after refused relink = %q, %v", got, err)
	}
	_, err = s.PutArtifact(ctx, run, "", "text/plain", []byte("x"))
	wantFieldError(t, err, ErrInvalidArgument, "name")
	_, err = s.Artifact(ctx, "not-a-digest")
	wantFieldError(t, err, ErrInvalidArgument, "digest")
	_, err = s.Artifact(ctx, digestOf("never stored"))
	var ae *ArtifactError
	if !errors.Is(err, ErrArtifactMissing) || !errors.As(err, &ae) || ae.Digest != digestOf("never stored") {
		t.Errorf("Artifact(unknown) = %v, want *ArtifactError ErrArtifactMissing naming the digest", err)
	}
}

func TestChecksAndUsageRefusals(t *testing.T) {
	ctx := context.Background()
	s := mustOpen(t, storePath(t), OpenOptions{})
	const run = "r-checks"
	if err := s.OpenRun(ctx, run, testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCheck(ctx, run, Check{Name: "tests", Required: true, Status: CheckFailed}); err != nil {
		t.Fatal(err)
	}
	if err := s.RecordCheck(ctx, run, Check{Name: "tests", Required: true, Status: CheckPassed}); !errors.Is(err, ErrCheckExists) {
		t.Errorf("re-recording a failed check as passed: %v, want ErrCheckExists", err)
	}
	wantFieldError(t, s.RecordCheck(ctx, run, Check{Name: "x", Status: "ok"}), ErrInvalidArgument, "status")
	wantFieldError(t, s.RecordCheck(ctx, run, Check{Name: "", Status: CheckPassed}), ErrInvalidArgument, "name")
	wantFieldError(t, s.RecordCheck(ctx, run, Check{Name: "y", Status: CheckPassed, Evidence: json.RawMessage(`[1]`)}), ErrInvalidArgument, "evidence")

	wantFieldError(t, s.RecordUsage(ctx, run, UsageRow{SessionID: "s", Source: SourceWire, State: UsageReported, PromptTokens: i64(1), TotalTokens: i64(1)}),
		ErrInvalidArgument, "usage[0].completion_tokens")
	wantFieldError(t, s.RecordUsage(ctx, run, UsageRow{SessionID: "s", Source: "proxy", State: UsageUnknown}), ErrInvalidArgument, "usage[0].source")
	wantFieldError(t, s.RecordUsage(ctx, run, UsageRow{Source: SourceWire, State: UsageUnknown}), ErrInvalidArgument, "usage[0].session_id")
	wantFieldError(t, s.RecordUsage(ctx, run, UsageRow{SessionID: "s", Source: SourceWire, State: UsagePartial, PromptTokens: i64(-1)}), ErrInvalidArgument, "usage[0].prompt_tokens")

	// The gateway saw twice what the wire saw: a caller's "conserved" claim is refused.
	rows := []UsageRow{
		{SessionID: "s1", Source: SourceWire, State: UsageReported, PromptTokens: i64(10), CompletionTokens: i64(5), TotalTokens: i64(15)},
		{SessionID: "s1", Source: SourceStore, State: UsageReported, PromptTokens: i64(10), CompletionTokens: i64(5), TotalTokens: i64(15)},
		{SessionID: "s1", Source: SourceGateway, State: UsageReported, PromptTokens: i64(20), CompletionTokens: i64(10), TotalTokens: i64(30)},
	}
	if err := s.RecordUsage(ctx, run, rows...); err != nil {
		t.Fatal(err)
	}
	claim := []UsageVerdict{{SessionID: "s1", Verdict: UsageConserved}}
	if err := s.RecordUsageVerdicts(ctx, run, claim); !errors.Is(err, ErrUsageContradicted) {
		t.Errorf("false conserved claim: %v, want ErrUsageContradicted", err)
	}
	if err := s.RecordUsageVerdicts(ctx, run, []UsageVerdict{{SessionID: "s9", Verdict: UsageConserved}}); !errors.Is(err, ErrUsageContradicted) {
		t.Errorf("conserved claim without rows: %v, want ErrUsageContradicted", err)
	}
	if err := s.RecordUsageVerdicts(ctx, run, ReconcileUsage(rows)); err != nil {
		t.Errorf("recording the reconciled mismatch: %v", err)
	}
	wantFieldError(t, s.RecordUsageVerdicts(ctx, run, []UsageVerdict{{SessionID: "s1", Verdict: "fine"}}), ErrInvalidArgument, "usage_verdicts[0].verdict")
	sum, err := s.Run(ctx, run)
	if err != nil {
		t.Fatal(err)
	}
	if len(sum.UsageVerdicts) != 1 || sum.UsageVerdicts[0].Verdict != UsageMismatch || len(sum.Checks) != 1 || sum.Checks[0].Status != CheckFailed {
		t.Errorf("refused writes leaked into the run: %+v", sum)
	}
}

func TestWritesRefused(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	s := mustOpen(t, path, OpenOptions{})
	const run = "r-final"
	if err := s.OpenRun(ctx, run, testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.AppendEvent(ctx, run, Event{Type: "a", Payload: json.RawMessage(`{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Finalize(ctx, run, Verdict{Verdict: VerdictRejected, Reasons: []string{"stopped"}}); err != nil {
		t.Fatal(err)
	}
	large := largeData(InlineLimit+10, 3)
	usage := UsageRow{SessionID: "s", Source: SourceWire, State: UsageUnknown}
	writes := map[string]func(runID string) error{
		"AppendEvent": func(id string) error {
			_, err := s.AppendEvent(ctx, id, Event{Type: "late", Payload: json.RawMessage(`{}`)})
			return err
		},
		"PutArtifact small": func(id string) error {
			_, err := s.PutArtifact(ctx, id, "late.txt", "text/plain", []byte("late"))
			return err
		},
		"PutArtifact large": func(id string) error {
			_, err := s.PutArtifact(ctx, id, "late.bin", "", large)
			return err
		},
		"RecordUsage": func(id string) error { return s.RecordUsage(ctx, id, usage) },
		"RecordUsageVerdicts": func(id string) error {
			return s.RecordUsageVerdicts(ctx, id, []UsageVerdict{{SessionID: "s", Verdict: UsageVerdictUnknown}})
		},
		"RecordCheck": func(id string) error { return s.RecordCheck(ctx, id, Check{Name: "late", Status: CheckPassed}) },
		"Finalize": func(id string) error {
			_, err := s.Finalize(ctx, id, Verdict{Verdict: VerdictAccepted})
			return err
		},
	}
	for name, write := range writes {
		t.Run(name+" after finalize", func(t *testing.T) {
			if err := write(run); !errors.Is(err, ErrFinalized) {
				t.Errorf("%s on a finalized run: %v, want ErrFinalized", name, err)
			}
		})
		t.Run(name+" on missing run", func(t *testing.T) {
			if err := write("missing"); !errors.Is(err, ErrNoRun) {
				t.Errorf("%s on a missing run: %v, want ErrNoRun", name, err)
			}
		})
	}
	if _, err := os.Stat(s.ArtifactPath(digestOfBytes(large))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("refused large artifact left a payload file: %v", err)
	}
	vs, err := s.Verify(ctx, run)
	if err != nil || vs[0].Status != VerifyOK {
		t.Errorf("finalized run after refused writes: %+v, %v", vs, err)
	}
	mustClose(t, s)
	if err := s.OpenRun(ctx, "after-close", testEnvelope(ModeLive), ""); !errors.Is(err, ErrClosed) {
		t.Errorf("write after Close: %v, want ErrClosed", err)
	}
	if err := s.Close(); err != nil {
		t.Errorf("second Close: %v", err)
	}

	ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
	roWrites := map[string]error{
		"OpenRun":     ro.OpenRun(ctx, "new", testEnvelope(ModeLive), ""),
		"RecordCheck": ro.RecordCheck(ctx, run, Check{Name: "x", Status: CheckPassed}),
		"RecordUsage": ro.RecordUsage(ctx, run, usage),
	}
	_, roWrites["AppendEvent"] = ro.AppendEvent(ctx, run, Event{Type: "a", Payload: json.RawMessage(`{}`)})
	_, roWrites["PutArtifact"] = ro.PutArtifact(ctx, run, "n", "", []byte("x"))
	_, roWrites["Finalize"] = ro.Finalize(ctx, run, Verdict{Verdict: VerdictRejected})
	roWrites["RecordUsageVerdicts"] = ro.RecordUsageVerdicts(ctx, run, nil)
	for name, err := range roWrites {
		if !errors.Is(err, ErrReadOnly) {
			t.Errorf("%s on a read-only store: %v, want ErrReadOnly", name, err)
		}
	}
}

func TestFinalizeDecidesVerdict(t *testing.T) {
	ctx := context.Background()
	passed := func(name string) Check { return Check{Name: name, Required: true, Status: CheckPassed} }
	cases := []struct {
		name        string
		mode        string
		checks      []Check
		request     Verdict
		breakLarge  bool
		want        string
		wantReasons []string // each must appear among the reasons
	}{
		{"required check failed", ModeLive, []Check{passed("files_exist"), {Name: "tests", Required: true, Status: CheckFailed}},
			Verdict{Verdict: VerdictAccepted}, false, VerdictRejected, []string{"required check tests failed"}},
		{"required check unknown", ModeLive, []Check{passed("files_exist"), {Name: "oracle", Required: true, Status: CheckUnknown}},
			Verdict{Verdict: VerdictAccepted}, false, VerdictRejected, []string{"required check oracle unknown"}},
		{"no checks", ModeLive, nil, Verdict{Verdict: VerdictAccepted}, false, VerdictRejected, []string{"no checks recorded"}},
		{"only optional checks", ModeLive, []Check{{Name: "lint", Status: CheckPassed}}, Verdict{Verdict: VerdictAccepted}, false,
			VerdictRejected, []string{"no required checks recorded"}},
		{"dry run", ModeDryRun, []Check{passed("tests")}, Verdict{Verdict: VerdictAccepted}, false, VerdictNonCertifiable,
			[]string{`envelope mode "dry_run" cannot certify (only live can)`}},
		{"observe", ModeObserve, []Check{passed("tests")}, Verdict{Verdict: VerdictAccepted}, false, VerdictNonCertifiable, nil},
		{"dry run rejected stays non-certifiable", ModeDryRun, nil, Verdict{Verdict: VerdictRejected, Reasons: []string{"timeout"}}, false,
			VerdictNonCertifiable, []string{"timeout"}},
		{"evidence broken", ModeLive, []Check{passed("tests")}, Verdict{Verdict: VerdictAccepted}, true, VerdictRejected, nil},
		{"rejection never upgraded", ModeLive, []Check{passed("tests")}, Verdict{Verdict: VerdictRejected, Reasons: []string{"operator"}}, false,
			VerdictRejected, []string{"operator"}},
		{"all required passed", ModeLive, []Check{passed("tests"), passed("oracle"), {Name: "lint", Status: CheckFailed}},
			Verdict{Verdict: VerdictAccepted, Reasons: []string{"reference result"}}, false, VerdictAccepted, []string{"reference result"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			s := mustOpen(t, storePath(t), OpenOptions{})
			const run = "r"
			if err := s.OpenRun(ctx, run, testEnvelope(tc.mode), ""); err != nil {
				t.Fatal(err)
			}
			if _, err := s.AppendEvent(ctx, run, Event{Type: "member_started", Payload: json.RawMessage(`{"formation": "pipeline"}`)}); err != nil {
				t.Fatal(err)
			}
			large := largeData(InlineLimit+5, 9)
			d, err := s.PutArtifact(ctx, run, "big", "", large)
			if err != nil {
				t.Fatal(err)
			}
			if tc.breakLarge {
				if err := os.Remove(s.ArtifactPath(d)); err != nil {
					t.Fatal(err)
				}
			}
			for _, c := range tc.checks {
				if err := s.RecordCheck(ctx, run, c); err != nil {
					t.Fatal(err)
				}
			}
			fin, err := s.Finalize(ctx, run, tc.request)
			if err != nil {
				t.Fatalf("Finalize: %v", err)
			}
			if fin.Verdict.Verdict != tc.want {
				t.Fatalf("verdict %q (reasons %q), want %q", fin.Verdict.Verdict, fin.Verdict.Reasons, tc.want)
			}
			for _, r := range tc.wantReasons {
				if !contains(fin.Verdict.Reasons, r) {
					t.Errorf("reasons %q lack %q", fin.Verdict.Reasons, r)
				}
			}
			if tc.want != VerdictAccepted && len(fin.Verdict.Reasons) == 0 {
				t.Errorf("a %s verdict carries no reason", tc.want)
			}
			sum, err := s.Run(ctx, run)
			if err != nil || sum.Verdict == nil || sum.Verdict.Verdict != tc.want {
				t.Fatalf("stored verdict = %+v, %v", sum.Verdict, err)
			}
			if diff := cmp.Diff(fin.Verdict, *sum.Verdict, cmpopts.EquateEmpty()); diff != "" {
				t.Errorf("stored verdict differs (-finalize +stored):\n%s", diff)
			}
			vs, err := s.Verify(ctx, run)
			if err != nil {
				t.Fatal(err)
			}
			wantStatus := VerifyOK
			if tc.breakLarge {
				wantStatus = VerifyMissingPayload
			}
			if vs[0].Status != wantStatus {
				t.Errorf("Verify = %+v, want %s", vs[0], wantStatus)
			}
		})
	}
}

func TestDecideVerdictNeverAcceptsWeakerEvidence(t *testing.T) {
	// Exhaustive over small inputs: accepted only for a live run with at
	// least one required check, every required check passed, and evidence
	// that verifies.
	statuses := []string{CheckPassed, CheckFailed, CheckUnknown}
	modes := []string{ModeLive, ModeDryRun, ModeObserve}
	requests := []string{VerdictAccepted, VerdictRejected, VerdictNonCertifiable}
	for _, mode := range modes {
		for _, req := range requests {
			for _, broken := range []bool{false, true} {
				for n := 0; n <= 2; n++ {
					var sets [][]Check
					var gen func(prefix []Check)
					gen = func(prefix []Check) {
						if len(prefix) == n {
							sets = append(sets, append([]Check(nil), prefix...))
							return
						}
						for _, st := range statuses {
							for _, req := range []bool{true, false} {
								gen(append(prefix, Check{Name: string(rune('a' + len(prefix))), Required: req, Status: st}))
							}
						}
					}
					gen(nil)
					for _, checks := range sets {
						var integrity []string
						if broken {
							integrity = []string{"event 1: hash mismatch"}
						}
						got := decideVerdict(mode, checks, integrity, Verdict{Verdict: req})
						supported := mode == ModeLive && !broken && req == VerdictAccepted && len(checkProblems(checks)) == 0
						if (got.Verdict == VerdictAccepted) != supported {
							t.Fatalf("mode %s request %s broken %v checks %+v -> %s", mode, req, broken, checks, got.Verdict)
						}
					}
				}
			}
		}
	}
}

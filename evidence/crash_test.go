package evidence

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"testing"
)

const helperAppendEnv = "ASSAY_EVIDENCE_HELPER_APPEND"

// TestHelperAppender is not a test: re-executed by TestCrashMidRun, it opens
// the store named in its environment, finalizes one run, then appends batches
// to a second run forever, printing the committed seq after each batch.
func TestHelperAppender(t *testing.T) {
	path := os.Getenv(helperAppendEnv)
	if path == "" {
		t.Skip("helper process for the crash test")
	}
	ctx := context.Background()
	s, err := Open(ctx, path, OpenOptions{Command: "crash-helper"})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(3)
	}
	must := func(err error) {
		if err != nil {
			fmt.Println("error:", err)
			os.Exit(4)
		}
	}
	must(s.OpenRun(ctx, "done", testEnvelope(ModeLive), ""))
	_, err = s.AppendEvent(ctx, "done", Event{Type: "step", Payload: json.RawMessage(`{"i":1}`)})
	must(err)
	must(s.RecordCheck(ctx, "done", Check{Name: "tests", Required: true, Status: CheckPassed}))
	_, err = s.Finalize(ctx, "done", Verdict{Verdict: VerdictAccepted})
	must(err)
	must(s.OpenRun(ctx, "crashing", testEnvelope(ModeLive), ""))
	for batch := 0; ; batch++ {
		evs := make([]Event, 500)
		for i := range evs {
			evs[i] = Event{Type: "step", MemberID: "m", SessionID: "crashing-m", Payload: payload(`{"batch":%d,"i":%d}`, batch, i)}
		}
		out, err := s.AppendEvents(ctx, "crashing", evs)
		must(err)
		fmt.Println("committed", out[len(out)-1].Seq)
	}
}

func TestCrashMidRunLeavesAnInterruptedRunThatVerifies(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	mustClose(t, mustOpen(t, path, OpenOptions{}))
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperAppender$")
	cmd.Env = append(os.Environ(), helperAppendEnv+"="+path)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	sc := bufio.NewScanner(stdout)
	var committed int64
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "error:") {
			t.Fatalf("helper: %s", line)
		}
		if _, err := fmt.Sscanf(line, "committed %d", &committed); err == nil && committed >= 5000 {
			break
		}
	}
	if committed < 5000 {
		t.Fatalf("helper stopped after %d events", committed)
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// A reader sees the open run has no live writer: interrupted, its
	// recorded prefix verifies, and nothing is changed or created.
	before := fileDigest(t, path)
	ro := mustOpen(t, path, OpenOptions{ReadOnly: true})
	vs, err := ro.Verify(ctx, "crashing")
	if err != nil {
		t.Fatal(err)
	}
	if vs[0].Status != VerifyInterrupted || vs[0].FirstBadSeq != 0 || !strings.Contains(vs[0].Detail, "no writer holds the store") || !vs[0].Passed() {
		t.Fatalf("reader's verification %+v", vs[0])
	}
	mustClose(t, ro)
	if after := fileDigest(t, path); after != before {
		t.Fatal("a reader changed the store")
	}

	// The next writer seals it at its first write: interrupted, finalized
	// rejected for the reason "interrupted", its recorded events kept.
	w := mustOpen(t, path, OpenOptions{Command: "next writer"})
	if got := w.Recovered(); len(got) != 0 {
		t.Fatalf("Recovered() before any write = %v", got)
	}
	if err := w.OpenRun(ctx, "after", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	if got := w.Recovered(); len(got) != 1 || got[0] != "crashing" {
		t.Fatalf("Recovered() = %v, want [crashing]", got)
	}
	sum, err := w.Run(ctx, "crashing")
	if err != nil {
		t.Fatal(err)
	}
	if sum.Status != StatusInterrupted || !sum.Sealed || !sum.Interrupted || sum.Verdict == nil || sum.Verdict.Verdict != VerdictRejected ||
		sum.Verdict.Reasons[0] != ReasonInterrupted || sum.TerminalHash == "" || len(sum.StatusChanges) != 1 ||
		!strings.Contains(sum.StatusChanges[0].Reason, "crash-helper) ended without closing the store") {
		t.Fatalf("run after recovery: status %s verdict %+v terminal %q changes %+v", sum.Status, sum.Verdict, sum.TerminalHash, sum.StatusChanges)
	}
	// Every committed event is kept, plus the seal's run_finalized.
	if sum.EventCount < committed+1 {
		t.Fatalf("%d events stored, %d were committed before the kill", sum.EventCount, committed)
	}
	vs, err = w.Verify(ctx)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]RunVerification{}
	for _, v := range vs {
		got[v.RunID] = v
	}
	if got["done"].Status != VerifyOK {
		t.Errorf("the finalized run: %+v", got["done"])
	}
	if c := got["crashing"]; c.Status != VerifyInterrupted || c.FirstBadSeq != 0 || !strings.Contains(c.Detail, "sealed by writer 2") || !c.Passed() {
		t.Errorf("the interrupted run: %+v", c)
	}
	// Interrupted runs refuse writes and can never be accepted.
	if _, err := w.AppendEvent(ctx, "crashing", Event{Type: "step", Payload: json.RawMessage(`{}`)}); !errorsIs(err, ErrRunNotOpen) {
		t.Errorf("append to an interrupted run: %v", err)
	}
	if _, err := w.Finalize(ctx, "crashing", Verdict{Verdict: VerdictAccepted}); !errorsIs(err, ErrRunNotOpen) {
		t.Errorf("finalize an interrupted run: %v", err)
	}
	mustClose(t, w)
	// Tampering with the status record is noticed.
	rawExec(t, path, `DELETE FROM run_status_changes`)
	ro = mustOpen(t, path, OpenOptions{ReadOnly: true})
	vs, _ = ro.Verify(ctx, "crashing")
	if vs[0].Status != VerifyTampered {
		t.Errorf("interrupted run without its status change: %+v", vs[0])
	}
}

func TestCleanCloseWithAnOpenRun(t *testing.T) {
	ctx := context.Background()
	path := storePath(t)
	s := mustOpen(t, path, OpenOptions{Command: "assay matrix run"})
	if err := s.OpenRun(ctx, "left", testEnvelope(ModeLive), ""); err != nil {
		t.Fatal(err)
	}
	mustClose(t, s)
	s = mustOpen(t, path, OpenOptions{})
	if err := s.StartSession(ctx); err != nil {
		t.Fatal(err)
	}
	sum, err := s.Run(ctx, "left")
	if err != nil || sum.Status != StatusInterrupted || !sum.Sealed || !strings.Contains(sum.StatusChanges[0].Reason, "closed the store without finalizing") {
		t.Fatalf("run left open by a clean close: %+v %v", sum, err)
	}
}

package reports

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/gowebpki/jcs"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/browsertest"
)

// taskStore writes, through the evidence API as the harness does, one matrix of four runs of task
// "double" (repeat 1..4, providers ref-a and ref-b) whose stored evidence says four different things
// of their task file: the stored task.yaml hashes to the SHA-256 the manifest binds (matches); it
// hashes otherwise and the tests check says the task cannot be re-derived (mismatch); the run
// stored none (missing); the stored manifest does not hash to the envelope's manifest digest.
// It returns the store's path, the task file's SHA-256 and the run ids in that order.
// The store is written once per test binary and shared: callers only read it; a test that changes
// it takes taskStoreCopy.
func taskStore(t testing.TB) (string, string, []string) {
	t.Helper()
	v := theTaskStore.get(t, "task", func(t testing.TB, dir string) taskStoreValue {
		path, sha, ids := buildTaskStore(t, dir)
		return taskStoreValue{path, sha, ids}
	})
	return v.path, v.sha, slices.Clone(v.ids)
}

// taskStoreCopy is taskStore with the store copied to a directory of t's own.
func taskStoreCopy(t testing.TB) (string, string, []string) {
	t.Helper()
	path, sha, ids := taskStore(t)
	return filepath.Join(copyDir(t, filepath.Dir(path)), filepath.Base(path)), sha, ids
}

type taskStoreValue struct {
	path, sha string
	ids       []string
}

var theTaskStore sharedStore[taskStoreValue]

// buildTaskStore writes taskStore's store in dir.
func buildTaskStore(t testing.TB, dir string) (string, string, []string) {
	t.Helper()
	ctx := context.Background()
	path := filepath.Join(dir, "evidence.duckdb")
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{Command: "fixture"})
	must(t, err)
	defer s.Close()
	taskBytes := []byte("name: double\ndoc: doubles an int\n")
	taskSHA := digestOf(string(taskBytes))
	manifest := func(refSol bool) []byte {
		b, err := json.MarshalIndent(map[string]any{"catalog": "sequential", "formation": "sequential",
			"task": map[string]any{"name": "double", "sha256": taskSHA, "reference_solution": refSol}}, "", "  ")
		must(t, err)
		return b
	}
	digest := func(b []byte) string {
		c, err := jcs.Transform(b)
		must(t, err)
		return digestOf(string(c))
	}
	ids := []string{"run-task-ok", "run-task-bad", "run-task-none", "run-task-manifest"}
	for i, id := range ids {
		env := fixtureEnvelope("sequential", "sequential", "inv-task")
		env.Task, env.Repeat, env.Provider, env.Model = "double", i+1, []string{"ref-a", "ref-b"}[i%2], []string{"ref-model-a", "ref-model-b"}[i%2]
		m := manifest(true)
		env.ManifestDigest = digest(m)
		if id == "run-task-manifest" {
			env.ManifestDigest = digestOf("another manifest")
		}
		must(t, s.OpenRun(ctx, id, env, ""))
		_, err = s.PutArtifact(ctx, id, manifestArtifact, "application/json", m)
		must(t, err)
		verdict := evidence.Verdict{Verdict: evidence.VerdictAccepted}
		switch id {
		case "run-task-ok", "run-task-manifest":
			_, err = s.PutArtifact(ctx, id, taskArtifact, "application/yaml", taskBytes)
			must(t, err)
			must(t, s.RecordCheck(ctx, id, evidence.Check{Name: "tests", Required: true, Status: evidence.CheckPassed, Detail: "exec-1 passed 1/1"}))
		case "run-task-bad":
			_, err = s.PutArtifact(ctx, id, taskArtifact, "application/yaml", []byte("name: double\ndoc: edited\n"))
			must(t, err)
			must(t, s.RecordCheck(ctx, id, evidence.Check{Name: "tests", Required: true, Status: evidence.CheckUnknown,
				Detail: "the run's recorded task file cannot be re-derived, so its test command is unknown: task file does not match the case's manifest"}))
			verdict = evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: []string{"tests unknown"}}
		case "run-task-none":
			must(t, s.RecordCheck(ctx, id, evidence.Check{Name: "tests", Required: true, Status: evidence.CheckUnknown,
				Detail: "the run's recorded task file cannot be re-derived, so its test command is unknown: run stored no task.yaml"}))
			verdict = evidence.Verdict{Verdict: evidence.VerdictRejected, Reasons: []string{"tests unknown"}}
		}
		_, err = s.Finalize(ctx, id, verdict)
		must(t, err)
	}
	return path, taskSHA, ids
}

func loadStore(t testing.TB, path string, sel Selection) Report {
	t.Helper()
	ctx := context.Background()
	s, err := evidence.Open(ctx, path, evidence.OpenOptions{ReadOnly: true})
	must(t, err)
	defer s.Close()
	r, err := Load(ctx, s, sel)
	must(t, err)
	return r
}

// The task file's full SHA-256 is read from the stored manifest (bound by the envelope's manifest
// digest) and re-derived from the stored task.yaml, never taken from the envelope's word: a stored
// file that hashes otherwise, a missing one and a manifest that is not the envelope's are each
// said, with what the checks said, in md, json, html and junit.
func TestTaskFileIsReadFromTheStoredEvidence(t *testing.T) {
	path, sha, ids := taskStore(t)
	r := loadStore(t, path, Selection{All: true, GroupBy: "provider"})
	want := map[string]string{ids[0]: TaskFileMatches, ids[1]: TaskFileMismatch, ids[2]: TaskFileMissing, ids[3]: TaskFileManifestMismatch}
	for id, status := range want {
		c, ok := caseByRun(r, id)
		if !ok {
			t.Fatalf("no case %s", id)
		}
		tf := c.TaskFile
		if tf.Status != status || tf.Name != "double" || tf.SHA256 != sha {
			t.Errorf("%s: task file %+v, want status %s, sha256 %s", id, tf, status, sha)
		}
		if tf.Verified() != (status == TaskFileMatches) {
			t.Errorf("%s: verified %v with status %s", id, tf.Verified(), status)
		}
		switch status {
		case TaskFileMatches:
			if tf.StoredSHA256 != sha || tf.ReferenceSolution == nil || !*tf.ReferenceSolution || len(tf.CheckFindings) != 0 {
				t.Errorf("%s: %+v", id, tf)
			}
		case TaskFileMismatch:
			if tf.StoredSHA256 == sha || len(tf.StoredSHA256) != 64 || len(tf.CheckFindings) != 1 ||
				!strings.HasPrefix(tf.CheckFindings[0], "tests: unknown: the run's recorded task file cannot be re-derived") {
				t.Errorf("%s: %+v", id, tf)
			}
		case TaskFileMissing:
			if tf.StoredSHA256 != "" || len(tf.CheckFindings) != 1 {
				t.Errorf("%s: %+v", id, tf)
			}
		case TaskFileManifestMismatch:
			if tf.ReferenceSolution != nil {
				t.Errorf("%s: a manifest the envelope does not bind says nothing of the reference solution: %+v", id, tf)
			}
		}
	}
	var md, js, html, junit bytes.Buffer
	must(t, Markdown(&md, r))
	must(t, JSON(&js, r))
	must(t, HTML(&html, r))
	must(t, JUnit(&junit, r))
	for _, want := range []string{"- task file: double, SHA-256 `" + sha + "` (re-derived:", "**does not match**", "**not stored**",
		"**manifest does not match**", "  - tests: unknown: the run's recorded task file cannot be re-derived", "- reference solution: used",
		"| double (task file does not match) | ref-b |", "| double | ref-a |"} {
		if !strings.Contains(md.String(), want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
	var back struct {
		Invocations []struct {
			Cases []struct {
				RunID    string         `json:"run_id"`
				TaskFile map[string]any `json:"task_file"`
			} `json:"cases"`
		} `json:"invocations"`
	}
	must(t, json.Unmarshal(js.Bytes(), &back))
	for _, c := range back.Invocations[0].Cases {
		if c.TaskFile["sha256"] != sha || c.TaskFile["status"] != want[c.RunID] {
			t.Errorf("json case %s task_file %v", c.RunID, c.TaskFile)
		}
	}
	for _, want := range []string{`title="task file SHA-256 ` + sha + ` (matches)"`, `<code class="hash">` + sha + `</code>`,
		`data-status="mismatch"`, "Cases by provider"} {
		if !strings.Contains(html.String(), want) {
			t.Errorf("html lacks %q", want)
		}
	}
	for _, want := range []string{`name="run run-task-ok task_file_sha256" value="` + sha + `"`, `name="run run-task-bad task_file" value="does not match"`,
		`<testsuite name="assay provider ref-a"`, `<testcase name="sequential [provider=ref-b model=ref-model-b task=double repeat=2]"`} {
		if !strings.Contains(junit.String(), want) {
			t.Errorf("junit lacks %q:\n%s", want, junit.String())
		}
	}
}

// Grouped by repeat, the HTML page in Chromium has one group section per repeat index whose
// counts are the group's cases; every row (in the groups and in the invocation's table) shows the
// case's task, provider, model and repeat, and the task's tooltip carries the full SHA-256.
func TestHTMLGroupsInChromium(t *testing.T) {
	path, sha, ids := taskStore(t)
	r := loadStore(t, path, Selection{All: true, GroupBy: "repeat"})
	var buf bytes.Buffer
	must(t, HTML(&buf, r))
	p, dir := inChromium(t, buf.Bytes(), "grouped")
	type row struct {
		Run, Task, Title, Provider, Model, Repeat string
	}
	rows := func(sel string) []row {
		t.Helper()
		got, err := browsertest.Eval[[]row](p, `[...document.querySelectorAll(`+"`"+sel+"`"+`)].map(r => ({Run: r.dataset.run,
			Task: r.querySelector("td.task").innerText, Title: r.querySelector("td.task a").title,
			Provider: r.querySelector("td.provider").innerText, Model: r.querySelector("td.model").innerText,
			Repeat: r.querySelector("td.repeat").innerText}))`)
		must(t, err)
		return got
	}
	groups, err := browsertest.Eval[[]string](p, `[...document.querySelectorAll("tr.group-total")].map(r => r.dataset.group + ":" + r.children[1].innerText)`)
	must(t, err)
	if strings.Join(groups, " ") != "1:1 2:1 3:1 4:1" {
		t.Errorf("group totals %v, want one case per repeat 1..4", groups)
	}
	grouped := rows("table.group tr.group-row")
	listed := rows("tr.case-row")
	if len(grouped) != 4 || len(listed) != 4 {
		t.Fatalf("%d grouped rows, %d listed rows; want 4 and 4", len(grouped), len(listed))
	}
	for _, rs := range [][]row{grouped, listed} {
		for _, rw := range rs {
			i := -1
			for j, id := range ids {
				if id == rw.Run {
					i = j
				}
			}
			wantProvider, wantModel := []string{"ref-a", "ref-b"}[i%2], []string{"ref-model-a", "ref-model-b"}[i%2]
			if !strings.HasPrefix(rw.Task, "double") || !strings.Contains(rw.Title, sha) || !strings.HasPrefix(rw.Provider, wantProvider) ||
				rw.Model != wantModel || rw.Repeat != "#"+string(rune('1'+i)) {
				t.Errorf("row %+v, want task double (sha %s), provider %s, model %s, repeat #%d", rw, sha, wantProvider, wantModel, i+1)
			}
		}
	}
	// The group sections' rows are in the group their key names.
	inGroup, err := browsertest.Eval[map[string]string](p, `Object.fromEntries([...document.querySelectorAll("table.group tr.group-row")].map(r => [r.dataset.run, r.closest("table").dataset.group]))`)
	must(t, err)
	for i, id := range ids {
		if inGroup[id] != string(rune('1'+i)) {
			t.Errorf("run %s is in group %q, want %d", id, inGroup[id], i+1)
		}
	}
	screenAndPrint(t, p, dir, "grouped", func() {})
}

// A task file that matches its manifest is vouched for only by evidence that verifies: in a case
// whose run does not verify, or in a report built with --no-verify, it is "unverified", never
// "matches"; a stored payload the store cannot give back is "unreadable", and the report is still
// written.
func TestATaskFileIsOnlyVouchedForByEvidenceThatVerifies(t *testing.T) {
	path, _, ids := taskStoreCopy(t)
	statusOf := func(r Report, id string) TaskFile {
		t.Helper()
		c, ok := caseByRun(r, id)
		if !ok {
			t.Fatalf("no case %s", id)
		}
		return c.TaskFile
	}
	if tf := statusOf(loadStore(t, path, Selection{All: true}), ids[0]); tf.Status != TaskFileMatches {
		t.Fatalf("untouched: %+v", tf)
	}
	if tf := statusOf(loadStore(t, path, Selection{All: true, NoVerify: true}), ids[0]); tf.Status != TaskFileUnverified || tf.Verified() {
		t.Errorf("--no-verify: %+v", tf)
	}

	raw := func(q string) {
		t.Helper()
		db, err := sql.Open("duckdb", path)
		must(t, err)
		defer db.Close()
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	// The run's envelope is edited: its evidence no longer verifies.
	raw(`UPDATE envelopes SET tenant = 'forged' WHERE run_id = '` + ids[0] + `'`)
	r := loadStore(t, path, Selection{All: true})
	c, _ := caseByRun(r, ids[0])
	if tf := c.TaskFile; !c.VerificationFailed() || tf.Status != TaskFileUnverified || tf.Verified() || !strings.Contains(tf.Detail, "does not verify") {
		t.Errorf("a run that does not verify: verification %s, task file %+v", c.Verification, tf)
	}
	var md, html bytes.Buffer
	must(t, Markdown(&md, r))
	must(t, HTML(&html, r))
	if strings.Contains(md.String(), "(re-derived:") || strings.Contains(html.String(), `title="task file SHA-256 `+statusOf(r, ids[0]).SHA256+` (matches)"`) {
		t.Errorf("a task file of a run that does not verify is shown as matching")
	}

	// The task file's payload is damaged in place: the report is still written, and says so.
	raw(`UPDATE artifacts SET data = 'x'::BLOB || data WHERE digest = (SELECT digest FROM run_artifacts WHERE run_id = '` + ids[0] + `' AND name = 'task.yaml')`)
	r = loadStore(t, path, Selection{All: true})
	if tf := statusOf(r, ids[0]); tf.Status != TaskFileUnreadable || tf.Verified() {
		t.Errorf("a damaged task.yaml: %+v", tf)
	}
}

package oracle

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"text/template"
	"time"
)

// artifactData is what the artifact templates in testdata/artifacts may
// bake in.
type artifactData struct {
	// Source is the path the artifact is written to.
	Source string
	// PIDFile is where the artifact records a pid.
	PIDFile string
	// EnvFile is where the artifact records the environment it saw.
	EnvFile string
}

// writeArtifact renders testdata/artifacts/<name><ext>.tmpl, where ext is
// file's extension (".go", ".py"), into a fresh temporary directory as file
// and returns its path and the data baked in.
func writeArtifact(t *testing.T, name, file string) (string, artifactData) {
	t.Helper()
	dir := t.TempDir()
	data := artifactData{
		Source:  filepath.Join(dir, file),
		PIDFile: filepath.Join(dir, "pid"),
		EnvFile: filepath.Join(dir, "env"),
	}
	tmpl, err := template.ParseFiles(filepath.Join("testdata", "artifacts", name+filepath.Ext(file)+".tmpl"))
	if err != nil {
		t.Fatalf("parse artifact template %s: %v", name, err)
	}
	var buf bytes.Buffer
	if err := tmpl.Execute(&buf, data); err != nil {
		t.Fatalf("render artifact template %s: %v", name, err)
	}
	if err := os.WriteFile(data.Source, buf.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return data.Source, data
}

// pollInterval is how often tests poll for a condition.
const pollInterval = 10 * time.Millisecond

// waitFor polls cond until it returns true or within passes, then fails the
// test with what.
func waitFor(t *testing.T, within time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for !cond() {
		select {
		case <-deadline.C:
			if cond() {
				return
			}
			t.Fatalf("timed out after %s waiting for %s", within, what)
		case <-tick.C:
		}
	}
}

// readPID reads a pid written by an artifact or script, polling until the
// file holds a number.
func readPID(t *testing.T, path string, within time.Duration) int {
	t.Helper()
	var pid int
	waitFor(t, within, "pid file "+path, func() bool {
		data, err := os.ReadFile(path)
		if err != nil {
			return false
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(data)))
		if err != nil || n <= 0 {
			return false
		}
		pid = n
		return true
	})
	return pid
}

// assertProcessGone polls kill(pid, 0) until it fails with ESRCH. A killed
// orphan stays a zombie until init reaps it, which may lag, hence the
// generous deadline.
func assertProcessGone(t *testing.T, pid int) {
	t.Helper()
	waitFor(t, 60*time.Second, "pid "+strconv.Itoa(pid)+" to be gone (ESRCH)", func() bool {
		return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH)
	})
}

package main

import (
	"bytes"
	"strings"
	"testing"
)

const passing = `{"Action":"start","Package":"m/a"}
{"Action":"run","Package":"m/a","Test":"TestFast"}
{"Action":"output","Package":"m/a","Test":"TestFast","Output":"=== RUN   TestFast\n"}
{"Action":"pass","Package":"m/a","Test":"TestFast","Elapsed":0.5}
{"Action":"pass","Package":"m/a","Test":"TestSlow/sub","Elapsed":9}
{"Action":"pass","Package":"m/a","Test":"TestSlow","Elapsed":9.25}
{"Action":"output","Package":"m/a","Output":"ok  \tm/a\t9.8s\n"}
{"Action":"pass","Package":"m/a","Elapsed":9.8}
`

func TestSummaryRanksTheSlowestTestsAndKeepsTheVerdict(t *testing.T) {
	var out bytes.Buffer
	if code := summarize(strings.NewReader(passing), &out, 10); code != 0 {
		t.Fatalf("exit %d on a passing run:\n%s", code, out.String())
	}
	got := out.String()
	slow, fast := strings.Index(got, "TestSlow"), strings.Index(got, "TestFast")
	if !strings.Contains(got, "ok  \tm/a\t9.8s") || slow < 0 || fast < slow || strings.Contains(got, "TestSlow/sub") ||
		!strings.Contains(got, "9.2  m/a TestSlow") || strings.Contains(got, "=== RUN") {
		t.Fatalf("summary:\n%s", got)
	}

	failing := passing + `{"Action":"output","Package":"m/b","Test":"TestBad","Output":"    b_test.go:9: wrong\n"}
{"Action":"fail","Package":"m/b","Test":"TestBad","Elapsed":1}
{"Action":"fail","Package":"m/b","Elapsed":1.1}
`
	out.Reset()
	if code := summarize(strings.NewReader(failing), &out, 10); code != 1 || !strings.Contains(out.String(), "--- FAIL: TestBad (m/b)\n    b_test.go:9: wrong") {
		t.Fatalf("exit %d on a failing run:\n%s", code, out.String())
	}
	out.Reset()
	if code := summarize(strings.NewReader(`{"ImportPath":"m/c","Action":"build-fail"}`+"\n"+passing), &out, 10); code != 1 {
		t.Fatalf("exit %d with a build failure", code)
	}
	if code := summarize(strings.NewReader("FAIL\tm/d [setup failed]\n"), &out, 10); code != 1 {
		t.Fatalf("exit %d with no package result", code)
	}
}

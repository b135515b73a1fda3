package oracle

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestCheckGoArtifact(t *testing.T) {
	t.Parallel()
	spec := DoubleSpec()
	tests := []struct {
		name   string
		src    string
		detail string // "" means accepted
	}{
		{name: "generic function in any package", src: "package zz\n\nfunc Double[T ~int | ~float64](x T) T { return x + x }\n"},
		{name: "package main", src: "package main\n\nfunc Double[T ~int](x T) T { return x }\n", detail: "package main"},
		{name: "syntax error", src: "package double\n\nfunc Double[T ~int](x T) T { return x \n", detail: "does not parse"},
		{name: "no such function", src: "package double\n\nfunc Twice[T ~int](x T) T { return x }\n", detail: "declares no function Double"},
		{name: "method of the same name", src: "package double\n\ntype n int\n\nfunc (n) Double(x int) int { return x }\n", detail: "declares no function Double"},
		{name: "not generic", src: "package double\n\nfunc Double(x int) int { return x }\n", detail: "not generic"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkGoArtifact(spec, []byte(tt.src))
			if (tt.detail == "") != (got == "") || !strings.Contains(got, tt.detail) {
				t.Fatalf("checkGoArtifact = %q, want %q", got, tt.detail)
			}
		})
	}
}

// The generated driver must be valid, formatted Go for every shape of spec:
// both domain types, and one type alone (no unused import or instantiation).
func TestGoDriverSource(t *testing.T) {
	t.Parallel()
	intOnly := Spec{Name: "square", Function: "Square", Domains: []Domain{{Type: TypeInt, Min: -5, Max: 5, Step: 1}},
		Reference: Reference{Int: func(x int64) int64 { return x * x }, GoExpr: "x * x"}}
	floatOnly := Spec{Name: "half", Function: "Half", Domains: []Domain{{Type: TypeFloat64, Min: -1, Max: 1, Step: 0.5}},
		Reference: Reference{Float64: func(x float64) float64 { return x / 2 }, GoExpr: "x / 2"}}
	tests := []struct {
		name    string
		spec    Spec
		want    []string
		notWant []string
	}{
		{name: "double", spec: DoubleSpec(), want: []string{"Double[int](a0)", "Double[float64](a0)", "a0 := -1024 + (rem)*1",
			"a0 := float64(-1024) + float64(float64(rem)*0.25)", "checkDomain0(&r)", "checkDomain1(&r)", "i < 2049", "i < 8193"},
			notWant: []string{"|| (got == 0 && want == 0)"}},
		{name: "int only", spec: intOnly, want: []string{"Square[int](a0)", "a0 := -5 + (rem)*1", "i < 11"}, notWant: []string{"float64](a0)", `"math"`}},
		{name: "float only", spec: floatOnly, want: []string{"Half[float64](a0)", "a0 := float64(-1) + float64(float64(rem)*0.5)", "i < 5"}, notWant: []string{"[int](a0)"}},
		{name: "two arguments, signed zeros equal", spec: ClampSpec(), want: []string{"Clamp[int](a0, a1)", "Clamp[float64](a0, a1)",
			"a1 := 0 + (rem%49)*1", "rem /= 49", "a0 := -64 + (rem)*1", "func refInt(x, limit int) int { return min(max(x, -limit), limit) }",
			"|| (got == 0 && want == 0)", "tuple(strconv.Itoa(a0), strconv.Itoa(a1))"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src, err := goDriverSource(tt.spec)
			if err != nil {
				t.Fatal(err)
			}
			for _, w := range tt.want {
				if !strings.Contains(string(src), w) {
					t.Errorf("driver lacks %q", w)
				}
			}
			for _, w := range tt.notWant {
				if strings.Contains(string(src), w) {
					t.Errorf("driver contains %q", w)
				}
			}
		})
	}
}

// TestGoVersionRemembered runs two checks with the same go tool: both keep the toolchain's
// version in goversion.log, the second from the memo the first filled.
func TestGoVersionRemembered(t *testing.T) {
	requireGo(t)
	t.Parallel()
	spec := squareIntSpec()
	path, _ := writeArtifact(t, "square_int", "square.go")
	var logs []string
	for i := range 2 {
		res, err := Check(context.Background(), spec, path, Options{WorkDir: t.TempDir()})
		if err != nil {
			t.Fatal(err)
		}
		if res.Verdict != VerdictPassed {
			t.Fatalf("check %d: Verdict=%q (%s), want passed", i, res.Verdict, res.Detail)
		}
		data, err := os.ReadFile(filepath.Join(res.WorkDir, goVersionLog))
		if err != nil || !strings.HasPrefix(string(data), "go1.") {
			t.Fatalf("check %d: %s = %q, %v; want the go version", i, goVersionLog, data, err)
		}
		logs = append(logs, string(data))
	}
	if logs[0] != logs[1] {
		t.Errorf("goversion.log differs between checks: %q, %q", logs[0], logs[1])
	}
	env := MinimalEnv()
	goBin, err := resolveExecutable("go", env)
	if err != nil {
		t.Fatal(err)
	}
	if out, ok := goVersionMemo.Load(goToolKey(goBin, env)); !ok || string(out.([]byte)) != logs[0] {
		t.Errorf("memo for %s = %q, %v; want %q", goBin, out, ok, logs[0])
	}
}

// TestGoToolKey: the memo key changes with the tool's file and with GOROOT, and is "" for a tool
// that cannot be described, so a changed toolchain is asked again.
func TestGoToolKey(t *testing.T) {
	t.Parallel()
	tool := filepath.Join(t.TempDir(), "go")
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho go1.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	first := goToolKey(tool, nil)
	if first == "" {
		t.Fatal("goToolKey of an existing file is empty")
	}
	if again := goToolKey(tool, nil); again != first {
		t.Errorf("goToolKey is not stable: %q, %q", first, again)
	}
	if other := goToolKey(tool, []string{"GOROOT=/elsewhere"}); other == first {
		t.Error("goToolKey ignores GOROOT")
	}
	if err := os.WriteFile(tool, []byte("#!/bin/sh\necho go1.99.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if changed := goToolKey(tool, nil); changed == first {
		t.Error("goToolKey did not change with the tool's file")
	}
	if missing := goToolKey(filepath.Join(t.TempDir(), "absent"), nil); missing != "" {
		t.Errorf("goToolKey of a missing tool = %q, want \"\"", missing)
	}
}

package oracle

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// BenchmarkOracle measures whole Checks of the double spec (10,242 checks)
// and, apart from them, the floor each is compared with. ns/op is the Check
// alone (the floor runs with the timer stopped); the custom metrics are:
//
//	check-ms  mean wall time of one Check, as a caller sees it (Result.Duration
//	          plus the call), interpreter start or build included
//	floor-ms  mean wall time of the floor: starting the same interpreter on an
//	          empty program (python3 -I -S -B -c pass), or, for Go, what a Check
//	          does to build and run a driver (go env GOVERSION, write a module,
//	          go build, run) with an empty main and no artifact
//	x-floor   check-ms / floor-ms
//
// Run with: go test ./oracle/ -run '^$' -bench Oracle -benchtime 10x
// The Go build cache is warmed before timing starts.
func BenchmarkOracle(b *testing.B) {
	ctx := context.Background()
	b.Run("python/double", func(b *testing.B) {
		py, err := FindPython(ctx, false)
		if err != nil {
			b.Skipf("no python3: %v", err)
		}
		spec, _ := DoubleSpec().ForLanguage(LanguagePython)
		path := writeBenchArtifact(b, "double.py", "def double(x):\n    return x + x\n")
		benchCheck(b, spec, path, Options{Python: py}, func() { pythonFloor(b, py) })
	})
	b.Run("python/double-finding-the-interpreter", func(b *testing.B) {
		py, err := FindPython(ctx, false)
		if err != nil {
			b.Skipf("no python3: %v", err)
		}
		spec, _ := DoubleSpec().ForLanguage(LanguagePython)
		path := writeBenchArtifact(b, "double.py", "def double(x):\n    return x + x\n")
		benchCheck(b, spec, path, Options{}, func() { pythonFloor(b, py) })
	})
	b.Run("go/double", func(b *testing.B) {
		path := writeBenchArtifact(b, "double.go", "package double\n\nfunc Double[T ~int | ~float64](x T) T { return x + x }\n")
		if res, err := Check(ctx, DoubleSpec(), path, Options{}); err != nil || res.Verdict != VerdictPassed {
			b.Skipf("go double does not pass here (%v): %s", err, res.Detail)
		}
		goFloor(b) // warm the cache for the empty driver too
		benchCheck(b, DoubleSpec(), path, Options{}, func() { goFloor(b) })
	})
}

// benchCheck times b.N Checks that must pass, and the floor with the timer
// stopped, and reports the metrics BenchmarkOracle describes.
func benchCheck(b *testing.B, spec Spec, path string, opts Options, floor func()) {
	var check, base time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		start := time.Now()
		res, err := Check(context.Background(), spec, path, opts)
		check += time.Since(start)
		if err != nil || res.Verdict != VerdictPassed || res.Checks != 10242 {
			b.Fatalf("Check = %s (%s), %v", res.Verdict, res.Detail, err)
		}
		b.StopTimer()
		start = time.Now()
		floor()
		base += time.Since(start)
		b.StartTimer()
	}
	n := float64(b.N)
	b.ReportMetric(float64(check.Microseconds())/1000/n, "check-ms")
	b.ReportMetric(float64(base.Microseconds())/1000/n, "floor-ms")
	b.ReportMetric(float64(check)/float64(base), "x-floor")
}

// pythonFloor starts the interpreter on an empty program the way the oracle
// starts its driver.
func pythonFloor(b *testing.B, py Python) {
	dir := b.TempDir()
	res, err := Run(context.Background(), Command{Path: py.Path, Args: []string{"-I", "-S", "-B", "-c", "pass"}, Dir: dir,
		Env: pythonEnv(), OutputPath: filepath.Join(dir, "out.log")})
	if err != nil || res.ExitCode != 0 {
		b.Fatalf("python floor: %+v, %v", res, err)
	}
}

// goFloor does what executeGo does to build and run a driver, with an empty
// main and no artifact.
func goFloor(b *testing.B) {
	ctx := context.Background()
	root := b.TempDir()
	env := MinimalEnv()
	goBin, err := resolveExecutable("go", env)
	if err != nil {
		b.Skip("go tool not on PATH")
	}
	run := func(c Command) {
		c.Env, c.OutputPath = env, filepath.Join(root, "out.log")
		res, err := Run(ctx, c)
		if err != nil || res.ExitCode != 0 {
			data, _ := os.ReadFile(c.OutputPath)
			b.Fatalf("go floor %s %v: %+v, %v\n%s", c.Path, c.Args, res, err, data)
		}
	}
	run(Command{Path: goBin, Args: []string{"env", "GOVERSION"}, Dir: root, Deadline: DefaultBuildDeadline})
	lang := goLanguageVersion(filepath.Join(root, "out.log"))
	module := filepath.Join(root, "module")
	if err := os.MkdirAll(module, 0o755); err != nil {
		b.Fatal(err)
	}
	for name, body := range map[string]string{
		"go.mod":  "module " + goModulePath + "\n\ngo " + lang + "\n",
		"main.go": "package main\n\nfunc main() {}\n",
	} {
		if err := os.WriteFile(filepath.Join(module, name), []byte(body), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	bin := filepath.Join(root, "driver")
	run(Command{Path: goBin, Args: []string{"build", "-buildvcs=false", "-o", bin, "."}, Dir: module, Deadline: DefaultBuildDeadline})
	run(Command{Path: bin, Dir: root})
}

// writeBenchArtifact writes an artifact for a benchmark.
func writeBenchArtifact(b *testing.B, name, body string) string {
	path := filepath.Join(b.TempDir(), name)
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		b.Fatal(err)
	}
	return path
}

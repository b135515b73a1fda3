// Command perf measures assay's indexer (graph + metrics) on real modules
// from the module cache against its floor, a bare packages.Load of the same
// patterns with the same mode, and against scip-go when it is installed.
// Each measurement runs in its own child process, so that its peak RSS
// (getrusage of that process; the go command it starts is not included, in
// every case alike) is its own. Neither assay nor its indexer sets a GC
// target: every child runs with the environment's (GOGC, GOMEMLIMIT).
//
// Run it through internal/tools/perf/perf.sh. To profile one measurement:
//
//	go run ./internal/tools/perf -child index -dir DIR -db DB -cpuprofile cpu.out
//
//	go run ./internal/tools/perf [-scip-go BIN] golang.org/x/tools@v0.52.0 gonum.org/v1/gonum@v0.17.0
package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	_ "github.com/mattn/go-sqlite3"
	"golang.org/x/tools/go/packages"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/internal/sqliteuri"
	"github.com/assay-audit/assay/metrics"
)

// childResult is what a child prints.
type childResult struct {
	Files    int  `json:"files"`
	Nodes    int  `json:"nodes"`
	Edges    int  `json:"edges"`
	Packages int  `json:"packages"`
	Reused   bool `json:"reused"`
}

func main() {
	child := flag.String("child", "", "internal: run one measurement (bare, index) in this process")
	dir := flag.String("dir", "", "internal: module directory")
	db := flag.String("db", "", "internal: database path")
	scip := flag.String("scip-go", "", "scip-go binary (empty: not run)")
	rounds := flag.Int("rounds", 5, "rounds of every measurement (each printed, and the fastest)")
	cpuProfile := flag.String("cpuprofile", "", "with -child: write a CPU profile of the measurement to this file")
	stages := flag.Bool("stages", false, "with -child index: print each indexing stage with the time since start on stderr")
	memProfile := flag.String("memprofile", "", "with -child: write an allocation profile (all allocations of the run) to this file")
	flag.StringVar(&afterLoadProfile, "cpuprofile-after-load", "", "with -child index: write a CPU profile of what follows the load (graph, database, metrics) to this file")
	flag.Parse()
	if *child != "" {
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fatal(err)
			}
			defer func() {
				pprof.StopCPUProfile()
				f.Close()
			}()
		}
		res, err := runChild(*child, *dir, *db, *stages)
		if *memProfile != "" {
			runtime.GC() // the profile shows allocations up to the last completed collection
			if f, ferr := os.Create(*memProfile); ferr == nil {
				_ = pprof.Lookup("allocs").WriteTo(f, 0)
				f.Close()
			}
		}
		if err != nil {
			pprof.StopCPUProfile()
			fmt.Fprintln(os.Stderr, "perf child:", err)
			os.Exit(1)
		}
		_ = json.NewEncoder(os.Stdout).Encode(res)
		return
	}
	self, err := os.Executable()
	if err != nil {
		fatal(err)
	}
	for _, mod := range flag.Args() {
		if err := measure(self, mod, *scip, rounds); err != nil {
			fatal(fmt.Errorf("%s: %w", mod, err))
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "perf:", err)
	os.Exit(2)
}

var env = []string{"GOFLAGS=-mod=mod"}

func runChild(mode, dir, db string, stages bool) (childResult, error) {
	ctx := context.Background()
	start := time.Now()
	var progress func(string)
	if stages || afterLoadProfile != "" {
		progress = func(stage string) {
			if stages {
				var ms runtime.MemStats
				runtime.ReadMemStats(&ms)
				fmt.Fprintf(os.Stderr, "%6.2fs %6.2fs CPU %5d MB alloc %3d GCs heap %4d next %4d sys %4d MB %s\n", time.Since(start).Seconds(), cpuSeconds(), ms.TotalAlloc>>20, ms.NumGC, ms.HeapAlloc>>20, ms.NextGC>>20, ms.Sys>>20, stage)
			}
			if afterLoadProfile != "" && strings.HasPrefix(stage, "building the graph") {
				startAfterLoadProfile()
			}
		}
		defer pprof.StopCPUProfile()
	}
	switch mode {
	case "bare":
		cfg := &packages.Config{Context: ctx, Mode: indexer.LoadMode(true), Dir: dir, Env: append(os.Environ(), env...), Tests: true}
		pkgs, err := packages.Load(cfg, "./...")
		if err != nil {
			return childResult{}, err
		}
		files := 0
		for _, p := range pkgs {
			files += len(p.CompiledGoFiles)
		}
		return childResult{Files: files, Packages: len(pkgs)}, nil
	case "index":
		snap, err := indexer.Index(ctx, indexer.Options{Dir: dir, Tests: true, DBPath: db, Env: env, Reuse: true,
			Enrich: metrics.Enrich(metrics.Options{}), EnrichID: metrics.RegistryID(),
			Progress: progress})
		if err != nil {
			return childResult{}, err
		}
		if progress != nil {
			progress("done")
		}
		c := snap.Counts
		return childResult{Files: c.Files, Nodes: c.Nodes, Edges: c.Edges, Packages: c.Packages, Reused: snap.Reused}, nil
	}
	return childResult{}, fmt.Errorf("unknown mode %q", mode)
}

// run measures one child process: wall time, peak RSS, and its output.
type run struct {
	wall  time.Duration
	cpu   time.Duration // user + system time of the process itself
	rssMB float64
	res   childResult
	err   error
}

func runProcess(dir string, out any, extraEnv []string, name string, args ...string) run {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	cmd.Env = append(append(os.Environ(), env...), extraEnv...)
	cmd.Stderr = os.Stderr
	start := time.Now()
	stdout, err := cmd.Output()
	r := run{wall: time.Since(start), err: err}
	if cmd.ProcessState != nil {
		r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.rssMB = float64(ru.Maxrss) / 1024 // KiB on Linux
		}
	}
	if err == nil && out != nil {
		r.err = json.Unmarshal(stdout, out)
	}
	return r
}

func measure(self, mod, scip string, rounds *int) error {
	out, err := exec.Command("go", "mod", "download", "-json", mod).Output()
	if err != nil {
		return fmt.Errorf("go mod download: %w", err)
	}
	var info struct{ Dir string }
	if err := json.Unmarshal(out, &info); err != nil {
		return err
	}
	tmp, err := os.MkdirTemp("", "assay-perf-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	db := filepath.Join(tmp, "graph.db")
	// A copy, as a checkout would be: the module cache's files are
	// read-only.
	src := filepath.Join(tmp, "src")
	if out, err := exec.Command("cp", "-r", info.Dir, src).CombinedOutput(); err != nil {
		return fmt.Errorf("copy %s: %v: %s", info.Dir, err, out)
	}
	if out, err := exec.Command("chmod", "-R", "u+w", src).CombinedOutput(); err != nil {
		return fmt.Errorf("chmod %s: %v: %s", src, err, out)
	}
	info.Dir = src

	child := func(mode string) run {
		var res childResult
		r := runProcess(info.Dir, &res, nil, self, "-child", mode, "-dir", info.Dir, "-db", db)
		r.res = res
		return r
	}
	fmt.Printf("## %s (%d rounds; the machine is shared: each round's figures, and the fastest)\n\n", mod, *rounds)
	warm := child("bare") // warms the build cache's export data, as a previous build would
	if warm.err != nil {
		return fmt.Errorf("warm-up load: %w", warm.err)
	}
	// Each round runs every measurement once, in turn, so that a change of
	// load on the machine touches them alike.
	type roundRuns struct{ bare, cold, again, scip run }
	var all []roundRuns
	for round := 0; round < *rounds; round++ {
		var r roundRuns
		if r.bare = child("bare"); r.bare.err != nil {
			return r.bare.err
		}
		if err := os.Remove(db); err != nil && !os.IsNotExist(err) {
			return err
		}
		if r.cold = child("index"); r.cold.err != nil {
			return r.cold.err
		}
		if r.again = child("index"); r.again.err != nil {
			return r.again.err
		}
		if !r.again.res.Reused {
			return fmt.Errorf("the unchanged re-run did not reuse the snapshot")
		}
		if scip != "" {
			r.scip = runProcess(info.Dir, nil, nil, scip, "--output", filepath.Join(tmp, "index.scip"))
		}
		all = append(all, r)
	}
	fastest := func(pick func(roundRuns) run) run {
		var best run
		for _, r := range all {
			if x := pick(r); x.err == nil && x.wall > 0 && (best.wall == 0 || x.wall < best.wall) {
				best = x
			}
		}
		return best
	}
	bare := fastest(func(r roundRuns) run { return r.bare })
	cold := fastest(func(r roundRuns) run { return r.cold })
	again := fastest(func(r roundRuns) run { return r.again })
	scipRun := fastest(func(r roundRuns) run { return r.scip })
	fmt.Printf("Fastest of the rounds (by wall time):\n\n")
	fmt.Printf("| run | wall s | CPU s | peak RSS MiB | files | nodes | edges |\n| --- | --- | --- | --- | --- | --- | --- |\n")
	fmt.Printf("| bare packages.Load (floor) | %.2f | %.2f | %.0f | %d | | |\n", bare.wall.Seconds(), bare.cpu.Seconds(), bare.rssMB, bare.res.Files)
	fmt.Printf("| assay index, cold (graph + metrics) | %.2f | %.2f | %.0f | %d | %d | %d |\n", cold.wall.Seconds(), cold.cpu.Seconds(), cold.rssMB, cold.res.Files, cold.res.Nodes, cold.res.Edges)
	fmt.Printf("| assay index, unchanged re-run (reused) | %.2f | %.2f | %.0f | | | |\n", again.wall.Seconds(), again.cpu.Seconds(), again.rssMB)
	if scip != "" && scipRun.wall > 0 {
		fmt.Printf("| scip-go | %.2f | %.2f | %.0f | | | |\n", scipRun.wall.Seconds(), scipRun.cpu.Seconds(), scipRun.rssMB)
	}
	fmt.Println()
	fmt.Printf("Every round (wall s / CPU s; CPU is the measured process's user + system time, the go command's processes not counted, alike for every run):\n\n")
	fmt.Printf("| round | bare | cold | re-run | cold/bare wall | cold/bare CPU | re-run/cold wall | re-run/cold CPU |\n")
	fmt.Printf("| --- | --- | --- | --- | --- | --- | --- | --- |\n")
	ratio := func(a, b time.Duration) float64 { return a.Seconds() / b.Seconds() }
	for i, r := range all {
		fmt.Printf("| %d | %.2f / %.2f | %.2f / %.2f | %.2f / %.2f | %.2f | %.2f | %.3f | %.3f |\n", i+1,
			r.bare.wall.Seconds(), r.bare.cpu.Seconds(), r.cold.wall.Seconds(), r.cold.cpu.Seconds(),
			r.again.wall.Seconds(), r.again.cpu.Seconds(),
			ratio(r.cold.wall, r.bare.wall), ratio(r.cold.cpu, r.bare.cpu), ratio(r.again.wall, r.cold.wall), ratio(r.again.cpu, r.cold.cpu))
	}
	fmt.Println()
	fmt.Printf("ratios of the fastest runs: cold/floor wall %.2f, CPU %.2f (target <= 1.5); cold/floor RSS %.2f (target <= 2); re-run/cold wall %.3f, CPU %.3f (target <= 0.1)",
		ratio(cold.wall, bare.wall), ratio(cold.cpu, bare.cpu), cold.rssMB/bare.rssMB, ratio(again.wall, cold.wall), ratio(again.cpu, cold.cpu))
	if scip != "" && scipRun.wall > 0 {
		fmt.Printf("; cold/scip-go wall %.2f, CPU %.2f (target <= 1)", ratio(cold.wall, scipRun.wall), ratio(cold.cpu, scipRun.cpu))
	}
	fmt.Println()
	fmt.Println()
	if detail, err := betweennessDetail(db); err == nil {
		fmt.Printf("call graph for betweenness: %s\n\n", detail)
	}
	return nil
}

func betweennessDetail(path string) (string, error) {
	db, err := sql.Open("sqlite3", sqliteuri.File(path, "mode=ro"))
	if err != nil {
		return "", err
	}
	defer db.Close()
	var d string
	err = db.QueryRow("SELECT detail FROM metric_values WHERE metric = 'betweenness_calls' LIMIT 1").Scan(&d)
	if i := strings.Index(d, "; algorithm"); i > 0 {
		d = d[:i]
	}
	return d, err
}

// cpuSeconds is the user and system CPU time of this process and of its
// waited-for children (the go command), in seconds.
func cpuSeconds() float64 {
	var self, children syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &children)
	t := 0.0
	for _, ru := range []syscall.Rusage{self, children} {
		t += float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	}
	return t
}

// afterLoadProfile is the -cpuprofile-after-load file.
var afterLoadProfile string

// startAfterLoadProfile starts the CPU profile into afterLoadProfile; the
// child stops it when the index returns.
func startAfterLoadProfile() {
	f, err := os.Create(afterLoadProfile)
	if err != nil {
		fatal(err)
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		fatal(err)
	}
}

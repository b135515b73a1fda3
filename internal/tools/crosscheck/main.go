// Command crosscheck compares assay's metrics with peer tools on real
// modules from the module cache: cyclomatic_folded against
// github.com/fzipp/gocyclo, cognitive against github.com/uudashr/gocognit
// -exact-recursion, and each package's imports (ce's input) against
// `go list -json`. It prints a Markdown report: counts, the share of
// identical values, and every disagreement with its classified reason.
//
// Run it through internal/tools/crosscheck/crosscheck.sh, which installs the peers.
//
//	go run ./internal/tools/crosscheck -gocyclo BIN -gocognit BIN github.com/spf13/cobra@v1.10.2 ...
package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"flag"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	_ "github.com/mattn/go-sqlite3"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

func main() {
	gocyclo := flag.String("gocyclo", "gocyclo", "gocyclo binary")
	gocognit := flag.String("gocognit", "gocognit", "gocognit binary")
	flag.Parse()
	if flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "crosscheck: name at least one module@version")
		os.Exit(2)
	}
	ctx := context.Background()
	failed := false
	for _, mod := range flag.Args() {
		ok, err := check(ctx, mod, *gocyclo, *gocognit)
		if err != nil {
			fmt.Fprintf(os.Stderr, "crosscheck: %s: %v\n", mod, err)
			os.Exit(2)
		}
		failed = failed || !ok
	}
	if failed {
		os.Exit(1)
	}
}

// key identifies a function by file and physical line of its func keyword.
type key struct {
	file string
	line int
}

type ours struct {
	id      string
	value   float64
	variant string
}

type peerStat struct {
	value int
	name  string
	file  string
	line  int
}

func moduleDir(ctx context.Context, mod string) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", mod)
	cmd.Dir = os.TempDir()
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("go mod download %s: %w", mod, err)
	}
	var info struct{ Dir, Error string }
	if err := json.Unmarshal(out, &info); err != nil || info.Error != "" {
		return "", fmt.Errorf("go mod download %s: %v %s", mod, err, info.Error)
	}
	return info.Dir, nil
}

func check(ctx context.Context, mod, gocyclo, gocognit string) (bool, error) {
	dir, err := moduleDir(ctx, mod)
	if err != nil {
		return false, err
	}
	tmp, err := os.MkdirTemp("", "assay-crosscheck-")
	if err != nil {
		return false, err
	}
	defer os.RemoveAll(tmp)
	dbPath := filepath.Join(tmp, "graph.db")
	env := []string{"GOFLAGS=-mod=mod"}
	snap, err := indexer.Index(ctx, indexer.Options{Dir: dir, Tests: true, DBPath: dbPath, Env: env,
		Enrich: metrics.Enrich(metrics.Options{}), EnrichID: metrics.RegistryID()})
	if err != nil {
		return false, err
	}
	db, err := indexer.OpenDatabase(ctx, dbPath)
	if err != nil {
		return false, err
	}
	defer db.Close()
	indexedFiles, err := indexedPaths(ctx, db)
	if err != nil {
		return false, err
	}

	fmt.Printf("## %s\n\nsnapshot %s, GOOS=%s GOARCH=%s CGO_ENABLED=%s, tests included; coverage %.3f\n\n",
		mod, snap.ID[:16], snap.GOOS, snap.GOARCH, snap.CGOEnabled, snap.Coverage)

	allOK := true
	for _, peer := range []struct {
		metric, name string
		args         []string
	}{
		{"cyclomatic_folded", "gocyclo", []string{gocyclo, dir}},
		{"cognitive", "gocognit -exact-recursion", []string{gocognit, "-exact-recursion", "-over", "-1", dir}},
	} {
		mine, err := ourValues(ctx, db, peer.metric)
		if err != nil {
			return false, err
		}
		stats, err := runPeer(ctx, dir, env, peer.args)
		if err != nil {
			return false, fmt.Errorf("%s: %w", peer.name, err)
		}
		ok := compare(peer.name, peer.metric, dir, mine, stats, indexedFiles)
		allOK = allOK && ok
	}
	ok, err := compareImports(ctx, db, dir, env)
	if err != nil {
		return false, err
	}
	return allOK && ok, nil
}

func indexedPaths(ctx context.Context, db *sql.DB) (map[string]bool, error) {
	rows, err := db.QueryContext(ctx, "SELECT DISTINCT path FROM files WHERE indexed = 1")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[string]bool{}
	for rows.Next() {
		var p string
		if err := rows.Scan(&p); err != nil {
			return nil, err
		}
		out[p] = true
	}
	return out, rows.Err()
}

// ourValues returns metric's values by (file, line), preferring the base
// variant when a file is compiled into several variants.
func ourValues(ctx context.Context, db *sql.DB, metric string) (map[key]ours, error) {
	rows, err := db.QueryContext(ctx, `SELECT v.subject, v.value, v.variant, f.path, n.start_line
		FROM metric_values v JOIN nodes n ON n.id = v.subject JOIN files f ON f.id = n.file_id
		WHERE v.metric = ? AND v.value IS NOT NULL AND n.kind IN ('func', 'method')`, metric)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := map[key]ours{}
	for rows.Next() {
		var o ours
		var k key
		if err := rows.Scan(&o.id, &o.value, &o.variant, &k.file, &k.line); err != nil {
			return nil, err
		}
		if prev, ok := out[k]; ok && prev.variant == "base" {
			continue
		}
		out[k] = o
	}
	return out, rows.Err()
}

var statLine = regexp.MustCompile(`^(\d+) (\S+) (.+) (\S+):(\d+):(\d+)$`)

func runPeer(ctx context.Context, dir string, env, args []string) ([]peerStat, error) {
	cmd := exec.CommandContext(ctx, args[0], args[1:]...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if ee, ok := err.(*exec.ExitError); !ok || ee.ExitCode() != 1 {
			return nil, fmt.Errorf("%v: %s", err, stderr.String())
		}
	}
	if s := strings.TrimSpace(stderr.String()); s != "" {
		fmt.Printf("> %s wrote to stderr: %s\n\n", filepath.Base(args[0]), firstLine(s))
	}
	var stats []peerStat
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		m := statLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		v, _ := strconv.Atoi(m[1])
		line, _ := strconv.Atoi(m[5])
		file := m[4]
		if !filepath.IsAbs(file) {
			file = filepath.Join(dir, file)
		}
		stats = append(stats, peerStat{value: v, name: m[3], file: filepath.Clean(file), line: line})
	}
	return stats, sc.Err()
}

func firstLine(s string) string {
	first, _, _ := strings.Cut(s, "\n")
	return first
}

// reasonFor classifies a disagreement about a function in file.
func reasonFor(file string, indexed map[string]bool) string {
	data, err := os.ReadFile(file)
	if err != nil {
		return "unexplained: source unreadable"
	}
	src := string(data)
	switch {
	case !indexed[file]:
		if strings.Contains(src, "//go:build") || strings.Contains(src, "// +build") || goosArchSuffix.MatchString(filepath.Base(file)) {
			return "known: the file is excluded by build constraints for this build context; the peer reads every file"
		}
		return "unexplained: the file is not in the index"
	case strings.Contains(src, "\n//line ") || strings.HasPrefix(src, "//line "):
		return "known: the file has //line directives; the peer reports adjusted positions, assay physical ones"
	}
	return ""
}

// syntaxAt says what the peer measured at file:line that assay does not.
func syntaxAt(file string, line int) string {
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, file, nil, parser.SkipObjectResolution)
	if err != nil {
		return "unexplained: unparsable file"
	}
	reason := "unexplained: no assay function at this position"
	for _, decl := range f.Decls {
		if fset.PositionFor(decl.Pos(), false).Line > line || fset.PositionFor(decl.End(), false).Line < line {
			continue
		}
		switch d := decl.(type) {
		case *ast.FuncDecl:
			if d.Body == nil {
				reason = "known: declared without a body (assembly or go:linkname); assay reports it unavailable, the peer scores it"
			}
		case *ast.GenDecl:
			reason = "definitional: a func literal at package level (var f = func...); assay measures functions, methods and the closures inside them"
		}
	}
	return reason
}

var goosArchSuffix = regexp.MustCompile(`_(aix|android|darwin|dragonfly|freebsd|illumos|ios|js|linux|netbsd|openbsd|plan9|solaris|wasip1|windows|386|amd64|arm|arm64|loong64|mips|mips64|mips64le|mipsle|ppc64|ppc64le|riscv64|s390x|wasm)(_test)?\.go$`)

func compare(peer, metric, dir string, mine map[key]ours, stats []peerStat, indexed map[string]bool) bool {
	seen := map[key]bool{}
	same, differ := 0, 0
	var rows []string
	unexplained := 0
	for _, s := range stats {
		k := key{s.file, s.line}
		o, ok := mine[k]
		rel, _ := filepath.Rel(dir, s.file)
		if !ok {
			reason := reasonFor(s.file, indexed)
			if reason == "" {
				reason = syntaxAt(s.file, s.line)
			}
			if strings.HasPrefix(reason, "unexplained") {
				unexplained++
			}
			rows = append(rows, fmt.Sprintf("| %s:%d | %s | %d | (none) | %s |", rel, s.line, s.name, s.value, reason))
			continue
		}
		seen[k] = true
		if int(o.value) == s.value {
			same++
			continue
		}
		differ++
		reason := reasonFor(s.file, indexed)
		if reason == "" {
			reason = "unexplained: values differ"
			unexplained++
		}
		rows = append(rows, fmt.Sprintf("| %s:%d | %s | %d | %g | %s |", rel, s.line, s.name, s.value, o.value, reason))
	}
	onlyOurs := 0
	for k, o := range mine {
		if seen[k] || !strings.HasPrefix(k.file, dir) {
			continue
		}
		onlyOurs++
		rel, _ := filepath.Rel(dir, k.file)
		reason := "unexplained: the peer did not report this function"
		if src, err := os.ReadFile(k.file); err == nil && strings.Contains(string(src), "//"+strings.Fields(peer)[0]+":ignore") {
			reason = "known: an ignore directive for the peer"
		} else if r := reasonFor(k.file, indexed); r != "" {
			reason = r
		} else {
			unexplained++
		}
		rows = append(rows, fmt.Sprintf("| %s:%d | %s | (none) | %g | %s |", rel, k.line, o.id, o.value, reason))
	}
	compared := same + differ
	pct := 0.0
	if compared > 0 {
		pct = 100 * float64(same) / float64(compared)
	}
	slices.Sort(rows)
	fmt.Printf("### %s vs %s\n\n", metric, peer)
	fmt.Printf("functions compared (both report them): %d; identical: %d (%.2f%%); different: %d; peer only: %d; assay only: %d; unexplained: %d\n\n",
		compared, same, pct, differ, len(stats)-compared, onlyOurs, unexplained)
	if len(rows) > 0 {
		fmt.Println("| position | function | peer | assay | reason |")
		fmt.Println("| --- | --- | --- | --- | --- |")
		for _, r := range rows {
			fmt.Println(r)
		}
		fmt.Println()
	}
	return pct >= 99 && unexplained == 0
}

// compareImports compares each base package's imports with go list's.
func compareImports(ctx context.Context, db *sql.DB, dir string, env []string) (bool, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-json", "./...")
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	out, err := cmd.Output()
	if err != nil {
		return false, fmt.Errorf("go list: %w", err)
	}
	listed := map[string][]string{}
	dec := json.NewDecoder(bytes.NewReader(out))
	for dec.More() {
		var p struct {
			ImportPath string
			Imports    []string
		}
		if err := dec.Decode(&p); err != nil {
			return false, err
		}
		listed[p.ImportPath] = p.Imports
	}
	same, total := 0, 0
	var rows []string
	for path, want := range listed {
		total++
		rs, err := db.QueryContext(ctx, `SELECT import_path FROM imports WHERE package_id = ? ORDER BY import_path`, "pkg:"+path)
		if err != nil {
			return false, err
		}
		var got []string
		for rs.Next() {
			var s string
			if err := rs.Scan(&s); err != nil {
				rs.Close()
				return false, err
			}
			got = append(got, s)
		}
		rs.Close()
		slices.Sort(want)
		if slices.Equal(got, want) {
			same++
			continue
		}
		rows = append(rows, fmt.Sprintf("| %s | %v | %v |", path, want, got))
	}
	fmt.Printf("### package imports (ce's input) vs go list -json\n\npackages: %d; identical import lists: %d\n\n", total, same)
	if len(rows) > 0 {
		slices.Sort(rows)
		fmt.Println("| package | go list | assay |")
		fmt.Println("| --- | --- | --- |")
		for _, r := range rows {
			fmt.Println(r)
		}
		fmt.Println()
	}
	return same == total, nil
}

package audit

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/assay-audit/assay/indexer"
	"github.com/assay-audit/assay/metrics"
)

// ErrBadThreshold is returned for a threshold that does not parse or names no metric of the
// registry.
var ErrBadThreshold = errors.New("bad metric threshold")

// Threshold is one `--fail-on METRIC<op>N`: a value that compares true is over it.
type Threshold struct {
	Metric string  `json:"metric"` // a metrics.Registry name, e.g. "cognitive"
	Op     string  `json:"op"`     // ">", ">=", "<" or "<="
	Value  float64 `json:"value"`
	// Unavailable counts the subjects whose value is unavailable (no value to compare: never
	// counted as within the threshold or over it); set by CheckThresholds.
	Unavailable int `json:"unavailable"`
	// Compared counts the values compared; set by CheckThresholds.
	Compared int `json:"compared"`
}

// String renders the threshold as it is written on the command line, e.g. "cognitive>30".
func (t Threshold) String() string {
	return t.Metric + t.Op + strconv.FormatFloat(t.Value, 'g', -1, 64)
}

// exceeds reports whether v is over the threshold.
func (t Threshold) exceeds(v float64) bool {
	switch t.Op {
	case ">":
		return v > t.Value
	case ">=":
		return v >= t.Value
	case "<":
		return v < t.Value
	case "<=":
		return v <= t.Value
	}
	return false
}

var thresholdRE = regexp.MustCompile(`^\s*([a-z0-9_]+)\s*(>=|<=|>|<)\s*(-?[0-9]+(?:\.[0-9]+)?)\s*$`)

// ParseThreshold parses "METRIC>N" (also >=, <, <=), N a decimal number. Errors: ErrBadThreshold
// naming the form, or the metrics of the registry when METRIC is not one of them.
func ParseThreshold(s string) (Threshold, error) {
	m := thresholdRE.FindStringSubmatch(s)
	if m == nil {
		return Threshold{}, fmt.Errorf("%w %q: write METRIC>N, METRIC>=N, METRIC<N or METRIC<=N, e.g. cognitive>30", ErrBadThreshold, s)
	}
	if _, ok := metrics.Lookup(m[1]); !ok {
		return Threshold{}, fmt.Errorf("%w %q: unknown metric %q (metrics: %s)", ErrBadThreshold, s, m[1], strings.Join(metrics.Names(""), ", "))
	}
	v, err := strconv.ParseFloat(m[3], 64)
	if err != nil {
		return Threshold{}, fmt.Errorf("%w %q: %v", ErrBadThreshold, s, err)
	}
	return Threshold{Metric: m[1], Op: m[2], Value: v}, nil
}

// MetricFinding is one metric value over a threshold, where it is in the code and how it was
// obtained (the provenance labels of metrics.Value).
type MetricFinding struct {
	Threshold string  `json:"threshold"` // e.g. "cognitive>30"
	Metric    string  `json:"metric"`
	Subject   string  `json:"subject"` // node id, e.g. "func:example.com/mx/cx.Logic"
	Scope     string  `json:"scope"`
	Value     float64 `json:"value"`
	// File is the subject's file relative to its module root (slash-separated), or the package's
	// directory for a package; StartLine and EndLine are 1-based, 0 when unknown.
	File      string `json:"file"`
	StartLine int    `json:"start_line,omitempty"`
	EndLine   int    `json:"end_line,omitempty"`
	// Provenance: kind (measured or proxy), method, coverage (0..1), snapshot, build context,
	// origin and variant, as stored with the value.
	Kind         string  `json:"kind"`
	Method       string  `json:"method"`
	Coverage     float64 `json:"coverage"`
	SnapshotID   string  `json:"snapshot_id"`
	BuildContext string  `json:"build_context"`
	Origin       string  `json:"origin"`
	Variant      string  `json:"variant"`
}

// CheckThresholds reads the metric values of the graph database at path (base package variants
// only: a test variant repeats its package's functions) and returns ths with their counts and
// every value over one, with the subject's position from the graph's nodes. Unavailable values are
// counted, never compared. Errors: metrics.Read's and indexer.OpenDatabase's.
func CheckThresholds(ctx context.Context, path string, ths []Threshold) ([]Threshold, []MetricFinding, error) {
	var names []string
	for _, t := range ths {
		names = append(names, t.Metric)
	}
	vals, err := metrics.Read(ctx, path, metrics.Filter{Metrics: names})
	if err != nil {
		return nil, nil, err
	}
	vals = slices.DeleteFunc(vals, func(v metrics.Value) bool { return v.Variant != "base" })
	out := slices.Clone(ths)
	var found []MetricFinding
	for i := range out {
		t := &out[i]
		for _, v := range vals {
			if v.Metric != t.Metric {
				continue
			}
			if v.Value == nil {
				t.Unavailable++
				continue
			}
			t.Compared++
			if !t.exceeds(*v.Value) {
				continue
			}
			found = append(found, MetricFinding{Threshold: t.String(), Metric: v.Metric, Subject: v.Subject, Scope: string(v.Scope), Value: *v.Value,
				Kind: string(v.Kind), Method: v.Method, Coverage: v.Coverage, SnapshotID: v.SnapshotID, BuildContext: v.BuildContext,
				Origin: v.Origin, Variant: v.Variant})
		}
	}
	if err := locate(ctx, path, found); err != nil {
		return nil, nil, err
	}
	return out, found, nil
}

// locate fills each finding's file and lines from the graph's nodes (a package: its directory
// relative to its module).
func locate(ctx context.Context, path string, found []MetricFinding) error {
	if len(found) == 0 {
		return nil
	}
	db, err := indexer.OpenDatabase(ctx, path)
	if err != nil {
		return err
	}
	defer db.Close()
	for i := range found {
		f := &found[i]
		var file, dir, modDir string
		var start, end int
		err := db.QueryRowContext(ctx, `SELECT coalesce(f.rel_path, f.path, ''), coalesce(n.start_line, 0), coalesce(n.end_line, 0),
			coalesce(p.dir, ''), coalesce(p.module_dir, '')
			FROM nodes n LEFT JOIN files f ON f.id = n.file_id LEFT JOIN packages p ON p.id = n.id WHERE n.id = ?`, f.Subject).
			Scan(&file, &start, &end, &dir, &modDir)
		if err != nil {
			return fmt.Errorf("audit: position of %s in %s: %w", f.Subject, path, err)
		}
		if file == "" && dir != "" {
			file = dir
			if rel, err := filepath.Rel(modDir, dir); err == nil && modDir != "" {
				file = rel
			}
		}
		f.File, f.StartLine, f.EndLine = filepath.ToSlash(file), start, end
	}
	return nil
}

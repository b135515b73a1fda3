package reports

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// GroupAxis is one axis a report's cases can be grouped by (Selection.GroupBy, `--group-by`): a
// name and the key it reads from a case.
type GroupAxis struct {
	// Name is the axis as `--group-by` takes it, e.g. "provider".
	Name string
	// Doc says what the key is, for help text.
	Doc string
	// Key is the case's group key; NotRecorded (or a phrase saying so) when the run did not record it.
	Key func(Case) string
}

// GroupAxes lists the axes, in the order help text shows them.
func GroupAxes() []GroupAxis {
	orNot := func(s string) string {
		if s == "" {
			return NotRecorded
		}
		return s
	}
	return []GroupAxis{
		{"provider", "the envelope's provider (a matrix file's provider name, \"reference\" or the base URL)", func(c Case) string { return orNot(c.Provider) }},
		{"model", "the envelope's model id", func(c Case) string { return orNot(c.Model) }},
		{"task", "the team task (\"double\"); not recorded before schema v7", func(c Case) string { return orNot(c.Task) }},
		{"language", "the artifact language", func(c Case) string { return orNot(c.Language) }},
		{"profile", "the task profile", func(c Case) string { return orNot(c.Profile) }},
		{"case", "the catalog case", func(c Case) string { return c.Name }},
		{"repeat", "the repeat index (1-based); \"not a repeat\" for runs without one", func(c Case) string { return groupKeyOfRepeat(c.Repeat) }},
	}
}

// groupKeyOfRepeat is a repeat index as a group key: "2", or NotARepeat for 0.
func groupKeyOfRepeat(n int) string {
	if n == 0 {
		return NotARepeat
	}
	return strconv.Itoa(n)
}

// NotARepeat is the repeat group key of a run recorded without a repeat index.
const NotARepeat = "not a repeat"

// GroupAxisNames are the names of GroupAxes.
func GroupAxisNames() []string {
	var names []string
	for _, a := range GroupAxes() {
		names = append(names, a.Name)
	}
	return names
}

// LookupGroupAxis returns the axis named name.
func LookupGroupAxis(name string) (GroupAxis, bool) {
	for _, a := range GroupAxes() {
		if a.Name == name {
			return a, true
		}
	}
	return GroupAxis{}, false
}

// Group is the cases of a report that share one key on the report's group axis.
type Group struct {
	// Key is the axis value, e.g. "ref-a" for provider, "2" for repeat.
	Key string `json:"key"`
	// Totals are over the group's cases; each repeat is its own case, counted on its own.
	Totals Totals `json:"totals"`
	// RunIDs are the group's runs in report order (invocations latest first, failures first).
	RunIDs []string `json:"run_ids"`
}

// groupCases groups cases by axis, keys in ascending order (numerically for repeat indexes).
func groupCases(axis GroupAxis, cases []Case) []Group {
	byKey := map[string][]Case{}
	var keys []string
	for _, c := range cases {
		k := axis.Key(c)
		if _, ok := byKey[k]; !ok {
			keys = append(keys, k)
		}
		byKey[k] = append(byKey[k], c)
	}
	slices.SortFunc(keys, func(a, b string) int {
		x, errA := strconv.Atoi(a)
		y, errB := strconv.Atoi(b)
		if errA == nil && errB == nil {
			return x - y
		}
		return strings.Compare(a, b)
	})
	groups := make([]Group, 0, len(keys))
	for _, k := range keys {
		g := Group{Key: k, Totals: totalsOf(byKey[k]), RunIDs: []string{}}
		for _, c := range byKey[k] {
			g.RunIDs = append(g.RunIDs, c.RunID)
		}
		groups = append(groups, g)
	}
	return groups
}

// writeGroups renders r's groups as a Markdown section: one row per key with its cases by verdict.
func writeGroups(b *strings.Builder, r Report) {
	if r.GroupBy == "" {
		return
	}
	fmt.Fprintf(b, "\n## Cases by %s\n\n| %s | cases | accepted | not accepted | by verdict | runs |\n| --- | --- | --- | --- | --- | --- |\n", r.GroupBy, r.GroupBy)
	for _, g := range r.Groups {
		acc := g.Totals.ByVerdict["accepted"]
		runs := make([]string, len(g.RunIDs))
		for i, id := range g.RunIDs {
			runs[i] = "`" + id + "`"
		}
		fmt.Fprintf(b, "| %s | %d | %d | %d | %s | %s |\n", cell(g.Key), g.Totals.Cases, acc, g.Totals.Cases-acc,
			byVerdict(g.Totals.ByVerdict), strings.Join(runs, " "))
	}
}

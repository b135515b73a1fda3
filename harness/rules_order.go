package harness

import (
	"fmt"
	"slices"
	"sort"
	"strings"
	"unicode/utf8"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
	"github.com/assay-audit/assay/runtime/formation"
)

// The evidence rules of the formations whose promise is an order: sequential, pipeline, parallel,
// hierarchical and multi_level_hierarchy.

// sequentialEvidence: members one after another in configuration order, each shown the outcomes
// of the members before it; the team succeeds when every member did.
func sequentialEvidence(d *derivation) (string, string) {
	ids := d.ids()
	for _, id := range ids {
		d.wantAll(id, runtime.ContractLine{Contract: runtime.ContractCompletion})
	}
	problems := append(d.onceEach(ids), d.inOrder(ids)...)
	var shown []string
	ok, why := true, ""
	for _, id := range ids {
		mt, o := d.lastOutcome(id)
		if mt != nil && len(shown) > 0 {
			if err := shownTo(mt, shown); err != nil {
				problems = append(problems, err.Error())
			}
		}
		shown = append(shown, outcomeLine(id, o))
		if !o.OK && ok {
			ok, why = false, o.Why
		}
	}
	problems = append(problems, d.teamClaim(ok, why)...)
	return d.verdict(problems, fmt.Sprintf("%s ran in order, each shown the recorded replies before it", strings.Join(ids, " -> ")))
}

// pipelineEvidence: stages in order, each given the previous stage's recorded reply as input; a
// failed stage stops the line.
func pipelineEvidence(d *derivation) (string, string) {
	ids := d.ids()
	for _, id := range ids {
		d.wantAll(id, runtime.ContractLine{Contract: runtime.ContractCompletion})
	}
	var problems []string
	ran := 0
	ok, why := true, ""
	for i, id := range ids {
		mt, o := d.lastOutcome(id)
		if mt == nil {
			if ok {
				problems = append(problems, fmt.Sprintf("stage %d (%s) did not run although every stage before it succeeded", i+1, id))
			}
			continue
		}
		if !ok {
			problems = append(problems, fmt.Sprintf("stage %d (%s) ran after a failed stage: the line must stop", i+1, id))
			continue
		}
		ran++
		if len(d.turns[id]) != 1 {
			problems = append(problems, fmt.Sprintf("stage %s ran %d times", id, len(d.turns[id])))
		}
		if i > 0 {
			prev := d.lastTurnOf(ids[i-1])
			if prev != nil && mt.Start.before(prev.End) {
				problems = append(problems, fmt.Sprintf("%s started (%s) before %s ended (%s)", id, d.at(mt.Start), ids[i-1], d.at(prev.End)))
			}
			_, po := d.lastOutcome(ids[i-1])
			if err := shownTo(mt, []string{po.Reply}); err != nil {
				problems = append(problems, fmt.Sprintf("stage %d's input: %v", i+1, err))
			}
		}
		if !o.OK {
			ok, why = false, o.Why
		}
	}
	if md, ok := d.metadata(); ok && md["stages_run"] != fmt.Sprint(ran) {
		got := md["stages_run"]
		problems = append(problems, fmt.Sprintf("the runtime recorded stages_run %q, the trace shows %d", got, ran))
	}
	problems = append(problems, d.teamClaim(ok && ran == len(ids), why)...)
	return d.verdict(problems, fmt.Sprintf("%d stages in order, each fed the previous stage's recorded reply", len(ids)))
}

// failedMembers lists, sorted, the members of ids whose last recorded reply is not OK.
func (d *derivation) failedMembers(ids []string) ([]string, string) {
	var failed []string
	why := ""
	for _, id := range ids {
		if _, o := d.lastOutcome(id); !o.OK {
			failed = append(failed, id)
			if why == "" {
				why = o.Why
			}
		}
	}
	sort.Strings(failed)
	return failed, why
}

// failedSummary compares the runtime's failed_members with the re-derived ones.
func (d *derivation) failedSummary(failed []string) []string {
	if d.attempt {
		return nil
	}
	tc, at, _ := claims[event.TeamCompleted](d)
	if len(tc) == 1 && !slices.Equal(nonNil(tc[0].FailedMembers), nonNil(failed)) {
		return []string{fmt.Sprintf("the runtime recorded failed members %v (team_completed, %s), the raw replies give %v", tc[0].FailedMembers, d.at(at[0]), failed)}
	}
	return nil
}

func nonNil(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}

// parallelEvidence: every member ran; the team succeeds when all did, and failures are summarised.
func parallelEvidence(d *derivation) (string, string) {
	if d.opts.Ensemble.Mode != "" {
		return ensembleEvidence(d)
	}
	ids := d.ids()
	var problems []string
	for _, id := range ids {
		d.wantAll(id, runtime.ContractLine{Contract: runtime.ContractCompletion})
		if len(d.turns[id]) == 0 {
			problems = append(problems, id+" did not run")
		}
	}
	problems = append(problems, d.independent(ids)...)
	if !d.attempt {
		problems = append(problems, d.admissionEvidence(ids)...)
		if d.opts.Isolation.Enabled {
			problems = append(problems, d.worktreeEvidence(ids)...)
		}
	}
	failed, why := d.failedMembers(ids)
	problems = append(problems, d.failedSummary(failed)...)
	problems = append(problems, d.teamClaim(len(failed) == 0, why)...)
	return d.verdict(problems, fmt.Sprintf("%d members ran independently (none shown another's reply), each reply valid%s%s",
		len(ids), d.admissionDetail, d.worktreeDetail))
}

// independent checks no member of ids was shown another's outcome ("[other] ..." in any of its
// recorded requests): their contexts are independent (FORMATIONS.md, parallel).
func (d *derivation) independent(ids []string) []string {
	var problems []string
	for _, id := range ids {
		for _, mt := range d.turns[id] {
			for _, x := range mt.Exchanges {
				text := ""
				if r, err := parseWireRequest(x.Request); err == nil {
					text = r.userText()
				}
				for _, other := range ids {
					if other != id && strings.Contains(text, "["+other+"] ") {
						problems = append(problems, fmt.Sprintf("%s request %d was shown %s's outcome: the members' contexts are not independent", id, x.P.Seq, other))
					}
				}
			}
		}
	}
	return slices.Compact(problems)
}

// supervisorOf is the member with role supervisor, else the first.
func (d *derivation) supervisorOf() runtime.MemberSpec {
	if s := d.withRole(formation.RoleSupervisor); len(s) == 1 {
		return s[0]
	}
	return d.members[0]
}

// hierarchicalEvidence: the supervisor synthesizes after every worker ended, shown every outcome.
func hierarchicalEvidence(d *derivation) (string, string) {
	sup := d.supervisorOf()
	workers := specIDs(d.without(sup.ID))
	for _, id := range workers {
		d.wantAll(id, runtime.ContractLine{Contract: runtime.ContractCompletion})
	}
	d.wantAll(sup.ID, runtime.ContractLine{Contract: runtime.ContractSynthesis, Candidates: workers})
	problems := append(d.onceEach(d.ids()), d.independent(workers)...)
	st := d.lastTurnOf(sup.ID)
	var lines []string
	for _, id := range workers {
		wt, wo := d.lastOutcome(id)
		lines = append(lines, outcomeLine(id, wo))
		if st != nil && wt != nil && (wt.End.zero() || st.Start.before(wt.End)) {
			problems = append(problems, fmt.Sprintf("supervisor %s started (%s) before %s ended", sup.ID, d.at(st.Start), id))
		}
	}
	if st != nil {
		if err := shownTo(st, lines); err != nil {
			problems = append(problems, err.Error())
		}
	}
	if md, ok := d.metadata(); ok && md["supervisor"] != sup.ID {
		got := md["supervisor"]
		problems = append(problems, fmt.Sprintf("the runtime recorded supervisor %q, the configuration gives %s", got, sup.ID))
	}
	failed, why := d.failedMembers(d.ids())
	problems = append(problems, d.teamClaim(len(failed) == 0, why)...)
	return d.verdict(problems, fmt.Sprintf("supervisor %s synthesized after %s, shown their recorded replies", sup.ID, strings.Join(workers, ", ")))
}

// treeOf is the configured hierarchy tree, or the one built from member order (breadth-first,
// fanout children per node).
func (d *derivation) treeOf() formation.TreeNode {
	if d.opts.Hierarchy.Tree != nil {
		return *d.opts.Hierarchy.Tree
	}
	fanout := d.opts.Hierarchy.Fanout
	if fanout <= 0 {
		fanout = defaultFanout
	}
	var build func(i int) formation.TreeNode
	build = func(i int) formation.TreeNode {
		n := formation.TreeNode{MemberID: d.members[i].ID}
		for c := i*fanout + 1; c <= i*fanout+fanout && c < len(d.members); c++ {
			n.Children = append(n.Children, build(c))
		}
		return n
	}
	return build(0)
}

// multiLevelEvidence: every member exactly once; each supervisor after its children, shown their
// outcomes; a failed descendant fails the team even when its supervisors synthesized.
func multiLevelEvidence(d *derivation) (string, string) {
	tree := d.treeOf()
	problems := d.onceEach(d.ids())
	var leaves []string
	var collect func(n formation.TreeNode)
	collect = func(n formation.TreeNode) {
		if len(n.Children) == 0 {
			leaves = append(leaves, n.MemberID)
		}
		for _, c := range n.Children {
			collect(c)
		}
	}
	collect(tree)
	// Every leaf gets its own portion of the team task, verbatim (an empty one said to be empty).
	strategy := d.opts.Hierarchy.Split
	if strategy == "" {
		strategy = "auto"
	}
	portions, used := splitPortions(d.s.team.Task, len(leaves), strategy)
	sizes := make([]string, len(portions))
	for i, id := range leaves {
		sizes[i] = fmt.Sprint(utf8.RuneCountInString(portions[i]))
		d.wantAll(id, runtime.ContractLine{Contract: runtime.ContractCompletion})
		mt := d.lastTurnOf(id)
		if mt == nil {
			continue
		}
		want := fmt.Sprintf("Your portion (%d of %d) of the task, verbatim between the markers:\n<<<\n%s\n>>>", i+1, len(leaves), portions[i])
		if portions[i] == "" {
			want = fmt.Sprintf("Your portion (%d of %d) of the task is empty", i+1, len(leaves))
		}
		if err := shownTo(mt, []string{want}); err != nil {
			problems = append(problems, fmt.Sprintf("leaf %s was not given its portion %d of %d (%s split): %v", id, i+1, len(leaves), used, err))
		}
	}
	depth := 0
	var walk func(n formation.TreeNode, level int)
	walk = func(n formation.TreeNode, level int) {
		depth = max(depth, level)
		if len(n.Children) == 0 {
			return
		}
		var kids []string
		for _, c := range n.Children {
			kids = append(kids, c.MemberID)
		}
		d.wantAll(n.MemberID, runtime.ContractLine{Contract: runtime.ContractSynthesis, Candidates: kids})
		st := d.lastTurnOf(n.MemberID)
		var lines []string
		for _, c := range n.Children {
			walk(c, level+1)
			ct, co := d.lastOutcome(c.MemberID)
			lines = append(lines, outcomeLine(c.MemberID, co))
			if st != nil && ct != nil && (ct.End.zero() || st.Start.before(ct.End)) {
				problems = append(problems, fmt.Sprintf("%s synthesized (started %s) before its member %s ended", n.MemberID, d.at(st.Start), c.MemberID))
			}
		}
		if st != nil {
			if err := shownTo(st, lines); err != nil {
				problems = append(problems, err.Error())
			}
		}
	}
	walk(tree, 1)
	// A tree deeper than max_depth must be refused before anything runs: one that ran is a
	// runtime that did not enforce the bound.
	maxDepth := d.opts.Hierarchy.MaxDepth
	if maxDepth == 0 {
		maxDepth = defaultMaxDepth
	}
	if depth > maxDepth {
		problems = append(problems, fmt.Sprintf("the tree of depth %d ran although max_depth is %d (it must be refused before execution)", depth, maxDepth))
	}
	if md, ok := d.metadata(); ok && (md["root"] != tree.MemberID || md["depth"] != fmt.Sprint(depth) || md["split"] != used ||
		md["portion_chars"] != strings.Join(sizes, ",")) {
		problems = append(problems, fmt.Sprintf("the runtime recorded root %q, depth %q, split %q, portions %q characters; the configured tree and the task give %s, %d, %s, %s",
			md["root"], md["depth"], md["split"], md["portion_chars"], tree.MemberID, depth, used, strings.Join(sizes, ",")))
	}
	failed, why := d.failedMembers(d.ids())
	problems = append(problems, d.failedSummary(failed)...)
	problems = append(problems, d.teamClaim(len(failed) == 0, why)...)
	return d.verdict(problems, fmt.Sprintf("tree of depth %d ran bottom-up, each leaf given its own portion (%s split), each supervisor shown its members' recorded replies", depth, used))
}

// splitPortions divides input into n contiguous portions whose concatenation is exactly input
// (FORMATIONS.md, multi_level_hierarchy): "line" cuts between lines (each keeps its newline),
// "count" between characters, "auto" is line whenever input holds a line break, else count. Sizes
// differ by at most one unit, the first portions taking the remainder; portions may be empty. It
// returns the portions and the strategy used.
func splitPortions(input string, n int, strategy string) ([]string, string) {
	if n < 1 {
		return nil, strategy
	}
	var lines []string
	for rest := input; rest != ""; {
		i := strings.IndexByte(rest, '\n')
		if i < 0 {
			lines = append(lines, rest)
			break
		}
		lines = append(lines, rest[:i+1])
		rest = rest[i+1:]
	}
	if strategy == "auto" {
		strategy = "count"
		if strings.Contains(input, "\n") {
			strategy = "line"
		}
	}
	units := lines
	if strategy != "line" {
		units = nil
		for _, r := range input {
			units = append(units, string(r))
		}
	}
	out := make([]string, n)
	base, rem, at := len(units)/n, len(units)%n, 0
	for i := range out {
		size := base
		if i < rem {
			size++
		}
		out[i] = strings.Join(units[at:at+size], "")
		at += size
	}
	return out, strategy
}

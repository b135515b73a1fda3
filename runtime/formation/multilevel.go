package formation

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"unicode/utf8"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/tool"
)

var multiLevelHierarchy = Formation{
	Name: "multi_level_hierarchy",
	Doc: "A tree of members, from member order (breadth-first, fanout 2 by default) or explicit " +
		`({"member_id":"root","children":[{"member_id":"a"}]}). Leaves execute disjoint portions of the ` +
		"team task, split by line, count or auto with every byte preserved, remainders included, and " +
		"empty portions stated explicitly; internal members synthesize their children's outcomes and the " +
		`root supervises, each answering exactly {"answer":"..."}. Every configured member appears exactly ` +
		"once; unknown ids, duplicates, missing members and trees deeper than max_depth (default 3) fail " +
		"before execution. A failed descendant stays failed even when its supervisor synthesizes.",
	Durable: false,
	Options: hierarchyOptions(),
	Validate: func(e Tools, team runtime.Team, opts Options) error {
		tree, err := hierarchyTree(team, opts.Hierarchy)
		if err != nil {
			return err
		}
		if err := checkTree(team, tree, opts.Hierarchy); err != nil {
			return err
		}
		switch opts.Hierarchy.Split {
		case "", "auto", "line", "count":
		default:
			return fmt.Errorf("%w: multi_level_hierarchy: split strategy %q is unknown (line, count, auto)", ErrInvalidConfig, opts.Hierarchy.Split)
		}
		var leaves []runtime.MemberSpec
		for _, id := range leafIDs(tree) {
			m, _ := team.Member(id)
			leaves = append(leaves, m)
		}
		for _, m := range team.Members {
			if isLeaf(tree, m.ID) {
				continue
			}
			// Internal members and the root synthesize: they supervise their subtree.
			for _, t := range m.AllowedTools {
				if a, _ := e.ToolAccess(t); a != tool.ReadOnly {
					return fmt.Errorf("%w: multi_level_hierarchy: internal member %q synthesizes and may hold only readonly tools, not %s tool %q",
						ErrInvalidConfig, m.ID, a, t)
				}
			}
		}
		return disjointWriters("multi_level_hierarchy", leaves)
	},
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
		tree, err := hierarchyTree(team, opts.Hierarchy)
		if err != nil {
			return runtime.TeamResult{}, err
		}
		leaves := leafIDs(tree)
		strategy := opts.Hierarchy.split()
		portions, used := Split(team.Task, len(leaves), strategy)
		portionOf := map[string]int{}
		for i, id := range leaves {
			portionOf[id] = i
		}
		rs := newResults(team)
		// Leaves and supervisors run concurrently; every result is collected here and recorded
		// once all members are done.
		collected := make(chan runtime.MemberResult, len(team.Members))
		var visit func(n TreeNode, parent string) runtime.MemberResult
		visit = func(n TreeNode, parent string) (r runtime.MemberResult) {
			defer func() { collected <- r }()
			m, _ := team.Member(n.MemberID)
			if len(n.Children) == 0 {
				k := portionOf[n.MemberID]
				instruction := fmt.Sprintf("Your portion (%d of %d) of the task, verbatim between the markers:\n<<<\n%s\n>>>", k+1, len(leaves), portions[k])
				if portions[k] == "" {
					instruction = fmt.Sprintf("Your portion (%d of %d) of the task is empty: the split left nothing for you.", k+1, len(leaves))
				}
				if parent != "" {
					instruction = fmt.Sprintf("Supervisor %s assigned you this. ", parent) + instruction
				}
				return opts.admission.admit(ctx, e, team, m, func(m runtime.MemberSpec) runtime.MemberResult {
					return e.RunTurn(ctx, team, m, runtime.Turn{Instruction: instruction, Contract: completion(team, m, opts)})
				})
			}
			var kids []runtime.MemberSpec
			for _, c := range n.Children {
				km, _ := team.Member(c.MemberID)
				kids = append(kids, km)
			}
			// The children run concurrently, each admitted for its own turn; this supervisor holds no
			// admission slot while it waits for them (with capacity 1 it would wait forever).
			childResults := concurrently(kids, func(km runtime.MemberSpec) runtime.MemberResult {
				for _, c := range n.Children {
					if c.MemberID == km.ID {
						return visit(c, n.MemberID)
					}
				}
				panic("unreachable: child not in its parent's children")
			})
			var context []string
			for _, r := range childResults {
				context = append(context, outcomeLine(r))
			}
			c := synthesisContract(team.Formation, m, memberIDs(kids), DefaultMaxAnswerChars)
			role := "an internal supervisor"
			if parent == "" {
				role = "the root supervisor"
			}
			return opts.admission.admit(ctx, e, team, m, func(m runtime.MemberSpec) runtime.MemberResult {
				return e.RunTurn(ctx, team, m, runtime.Turn{Context: context, ContextHeading: "Outcomes of the members you supervise:",
					Instruction: fmt.Sprintf("You are %s. Synthesize your members' outcomes; a failed member stays failed: say so.", role), Contract: &c})
			})
		}
		root := visit(*tree, "")
		close(collected)
		for r := range collected {
			rs.add(r)
		}
		treeJSON, _ := json.Marshal(tree)
		sizes := make([]string, len(portions))
		for i, p := range portions {
			sizes[i] = fmt.Sprint(utf8.RuneCountInString(p))
		}
		meta := map[string]string{"tree": string(treeJSON), "depth": fmt.Sprint(depth(*tree)), "split": used,
			"portion_chars": strings.Join(sizes, ","), "root": tree.MemberID}
		if !root.Success {
			return done(rs, false, "", meta), nil
		}
		return done(rs, true, withFindings(decode[Synthesis](root.Output).Answer, *tree, rs), meta), nil
	},
}

// withFindings is the final output (the seed's contract): the root's synthesis, then every other
// member's own finding, one outcome line each in tree order (depth first, children in order), so
// no member's work is only as its supervisors retold it.
func withFindings(synthesis string, tree TreeNode, rs *results) string {
	byID := map[string]runtime.MemberResult{}
	for _, r := range rs.list() {
		byID[r.MemberID] = r
	}
	var lines []string
	var walk func(n TreeNode)
	walk = func(n TreeNode) {
		for _, c := range n.Children {
			if r, ok := byID[c.MemberID]; ok {
				lines = append(lines, outcomeLine(r))
			}
			walk(c)
		}
	}
	walk(tree)
	if len(lines) == 0 {
		return synthesis
	}
	return synthesis + "\n\nMember findings:\n" + strings.Join(lines, "\n")
}

// hierarchyTree returns the explicit tree or builds one from member order: breadth-first, fanout
// children per node.
func hierarchyTree(team runtime.Team, o HierarchyOptions) (*TreeNode, error) {
	if o.Tree != nil {
		return o.Tree, nil
	}
	fanout := o.fanout()
	if fanout < 1 {
		return nil, fmt.Errorf("%w: multi_level_hierarchy: fanout %d must be >= 1", ErrInvalidConfig, fanout)
	}
	nodes := make([]*TreeNode, len(team.Members))
	for i, m := range team.Members {
		nodes[i] = &TreeNode{MemberID: m.ID}
	}
	// Children are attached bottom-up so each parent holds its complete subtree by value.
	for i := len(nodes) - 1; i >= 1; i-- {
		parent := (i - 1) / fanout
		nodes[parent].Children = append([]TreeNode{*nodes[i]}, nodes[parent].Children...)
	}
	return nodes[0], nil
}

// checkTree validates an explicit or built tree: known ids, no duplicates, every member present,
// depth within max_depth, and at least one leaf below the root unless the team is one member.
func checkTree(team runtime.Team, tree *TreeNode, o HierarchyOptions) error {
	maxDepth := o.maxDepth()
	seen := map[string]bool{}
	var walk func(n TreeNode) error
	walk = func(n TreeNode) error {
		if _, ok := team.Member(n.MemberID); !ok {
			return fmt.Errorf("%w: multi_level_hierarchy: tree names unknown member %q", ErrInvalidConfig, n.MemberID)
		}
		if seen[n.MemberID] {
			return fmt.Errorf("%w: multi_level_hierarchy: member %q appears more than once in the tree", ErrInvalidConfig, n.MemberID)
		}
		seen[n.MemberID] = true
		for _, c := range n.Children {
			if err := walk(c); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk(*tree); err != nil {
		return err
	}
	var missing []string
	for _, m := range team.Members {
		if !seen[m.ID] {
			missing = append(missing, m.ID)
		}
	}
	if len(missing) > 0 {
		return fmt.Errorf("%w: multi_level_hierarchy: member(s) %s missing from the tree", ErrInvalidConfig, strings.Join(missing, ", "))
	}
	if d := depth(*tree); d > maxDepth {
		return fmt.Errorf("%w: multi_level_hierarchy: tree depth %d exceeds max_depth %d", ErrInvalidConfig, d, maxDepth)
	}
	if len(tree.Children) == 0 {
		return fmt.Errorf("%w: multi_level_hierarchy: the root %q supervises nobody", ErrInvalidConfig, tree.MemberID)
	}
	return nil
}

func depth(n TreeNode) int {
	d := 0
	for _, c := range n.Children {
		d = max(d, depth(c))
	}
	return d + 1
}

// leafIDs lists the leaves depth-first, left to right.
func leafIDs(n *TreeNode) []string {
	if len(n.Children) == 0 {
		return []string{n.MemberID}
	}
	var out []string
	for i := range n.Children {
		out = append(out, leafIDs(&n.Children[i])...)
	}
	return out
}

func isLeaf(tree *TreeNode, id string) bool {
	for _, l := range leafIDs(tree) {
		if l == id {
			return true
		}
	}
	return false
}

// Split divides input into n contiguous portions whose concatenation is exactly input. Strategy
// "line" cuts between lines (each keeps its newline), "count" between characters (runes), and
// "auto" is line whenever input has lines (holds a line break: leaves beyond the lines get explicit
// empty portions), else count (the seed's contract). Sizes differ by at most one unit;
// the first portions take the remainder. Portions may be empty (input shorter than n units). It
// returns the portions and the strategy used.
func Split(input string, n int, strategy string) ([]string, string) {
	if n < 1 {
		return nil, strategy
	}
	lines := strings.SplitAfter(input, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	if strategy == "auto" {
		strategy = "count"
		if strings.Contains(input, "\n") {
			strategy = "line"
		}
	}
	var units []string
	if strategy == "line" {
		units = lines
	} else {
		for _, r := range input {
			units = append(units, string(r))
		}
	}
	out := make([]string, n)
	base, rem := len(units)/n, len(units)%n
	at := 0
	for i := 0; i < n; i++ {
		size := base
		if i < rem {
			size++
		}
		out[i] = strings.Join(units[at:at+size], "")
		at += size
	}
	return out, strategy
}

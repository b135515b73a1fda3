package formation

import (
	"context"
	"fmt"
	"regexp"
	"sort"
	"strings"

	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/event"
)

var dynamicRouter = Formation{
	Name: "dynamic_router",
	Doc: "Selects exactly one member for the team task and runs only it, preserving its structured " +
		"outcome, the tools it used and its member id. With a router member (formation role router) the " +
		`router answers exactly {"speaker_id":"<configured member id>"}. Otherwise explicit routes map ` +
		"keywords of the task to unique member names (resolved to ids before execution; unknown names " +
		"are configuration errors), and the default selector matches domain roles (executor, " +
		"researcher, reviewer) programmatically — it never parses model prose; an unmatched task selects " +
		"the first member with a warning. The selection is recorded as a router_selected event.",
	Durable: false,
	Options: routerOptions(),
	Validate: func(e Tools, team runtime.Team, opts Options) error {
		_, _, _, err := routerSetup(team, opts)
		return err
	},
	Run: func(ctx context.Context, e *runtime.Engine, team runtime.Team, opts Options) (runtime.TeamResult, error) {
		router, candidates, routes, err := routerSetup(team, opts)
		if err != nil {
			return runtime.TeamResult{}, err
		}
		rs := newResults(team)
		meta := map[string]string{}
		var selected, method, keyword string
		if router != nil {
			c := routerContract(team.Formation, *router, memberIDs(candidates), 1)
			r := e.RunTurn(ctx, team, *router, runtime.Turn{Context: []string{team.Task}, ContextHeading: "The task to route:", Contract: &c})
			rs.add(r)
			if !r.Success {
				meta["reason"] = "router failed"
				return done(rs, false, "", meta), nil
			}
			selected, method = decode[RouterChoice](r.Output).SpeakerID, "router"
			meta["router"] = router.ID
		} else {
			selected, method, keyword = selectProgrammatically(team.Task, candidates, routes)
			if method == "fallback" {
				_ = e.Emit(ctx, "", "", event.Warning{Warning: fmt.Sprintf(
					"dynamic_router: no route or domain role matched the task; selected the first member %s", selected)})
			}
		}
		if err := e.Emit(ctx, "", "", event.RouterSelected{SelectedMemberID: selected, Method: method, Keyword: keyword}); err != nil {
			return runtime.TeamResult{}, fmt.Errorf("record router_selected: %w", err)
		}
		m, _ := team.Member(selected)
		r := e.RunTurn(ctx, team, m, runtime.Turn{Instruction: "You were selected to carry out this task.", Contract: completion(team, m, opts)})
		rs.add(r)
		meta["selected_member_id"], meta["selection_method"] = selected, method
		if keyword != "" {
			meta["keyword"] = keyword
		}
		meta["selected_tools_used"] = strings.Join(r.ToolsUsed, ",")
		meta["selected_tool_calls"] = fmt.Sprint(r.ToolCalls)
		return done(rs, r.Success, r.Output, meta), nil
	},
}

// routerSetup returns the optional router member, the candidates, and the routes resolved from
// keyword -> member name to keyword -> member id.
func routerSetup(team runtime.Team, opts Options) (*runtime.MemberSpec, []runtime.MemberSpec, map[string]string, error) {
	r, found, err := oneWithRole(team, RoleRouter, -1)
	if err != nil {
		return nil, nil, nil, err
	}
	var router *runtime.MemberSpec
	if found {
		router = &r
	}
	candidates := team.Members
	if router != nil {
		candidates = without(team.Members, router.ID)
	}
	if len(candidates) == 0 {
		return nil, nil, nil, fmt.Errorf("%w: dynamic_router has no member to select", ErrInvalidConfig)
	}
	if router != nil && len(opts.Router.Routes) > 0 {
		return nil, nil, nil, fmt.Errorf("%w: dynamic_router: a router member and explicit routes are two selectors; configure one", ErrInvalidConfig)
	}
	byName := map[string]string{}
	for _, m := range candidates {
		if m.Name == "" {
			continue
		}
		if other, dup := byName[m.Name]; dup && len(opts.Router.Routes) > 0 {
			return nil, nil, nil, fmt.Errorf("%w: dynamic_router: members %q and %q share the name %q; route targets must be unique", ErrInvalidConfig, other, m.ID, m.Name)
		}
		byName[m.Name] = m.ID
	}
	routes := map[string]string{}
	for kw, name := range opts.Router.Routes {
		if strings.TrimSpace(kw) == "" {
			return nil, nil, nil, fmt.Errorf("%w: dynamic_router: a route has an empty keyword", ErrInvalidConfig)
		}
		id, ok := byName[name]
		if !ok {
			return nil, nil, nil, fmt.Errorf("%w: dynamic_router: route %q names unknown member %q", ErrInvalidConfig, kw, name)
		}
		routes[strings.ToLower(kw)] = id
	}
	return router, candidates, routes, nil
}

// RoleKeyword is one domain role of the default selector and the task words that select it.
type RoleKeyword struct {
	Role  string
	Words []string
}

// RoleKeywords returns the default selector's words per domain role, in the order the roles are
// checked; a new slice on every call. It is configuration the selection applies, published so an
// independent check can re-derive a selection.
func RoleKeywords() []RoleKeyword {
	return []RoleKeyword{
		{"executor", []string{"implement", "write", "build", "fix", "code", "create"}},
		{"researcher", []string{"research", "investigate", "find", "survey", "compare"}},
		{"reviewer", []string{"review", "audit", "critique", "inspect"}},
	}
}

// containsWord reports whether word occurs in text as a whole word, case-insensitively.
func containsWord(text, word string) bool {
	return regexp.MustCompile(`(?i)\b` + regexp.QuoteMeta(word) + `\b`).MatchString(text)
}

// selectProgrammatically picks by explicit route (sorted keyword order), then by domain role
// keywords, then the first member.
func selectProgrammatically(task string, candidates []runtime.MemberSpec, routes map[string]string) (id, method, keyword string) {
	kws := make([]string, 0, len(routes))
	for kw := range routes {
		kws = append(kws, kw)
	}
	sort.Strings(kws)
	for _, kw := range kws {
		if containsWord(task, kw) {
			return routes[kw], "route", kw
		}
	}
	for _, rk := range RoleKeywords() {
		for _, w := range rk.Words {
			if !containsWord(task, w) {
				continue
			}
			for _, m := range candidates {
				if m.DomainRole == rk.Role {
					return m.ID, "domain_role", w
				}
			}
		}
	}
	return candidates[0].ID, "fallback", ""
}

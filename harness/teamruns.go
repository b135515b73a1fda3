package harness

import (
	"strings"
	"sync"

	"github.com/assay-audit/assay/runtime"
)

// teamRuns is the set of team runs a matrix (or resume) process runs, each with its member sessions
// and the window of gateway record ids it ran in: a gateway record belongs to a case only when its
// session is one of that team's and it arrived while the team ran, so a request sent under a
// finished case's session during a later case is that later case's stray request, not the earlier
// case's (whose checks have already run). Safe for concurrent use.
type teamRuns struct {
	mu       sync.Mutex
	sessions map[string]*idWindow
	runs     map[string]bool
}

// idWindow is a team's gateway record ids (from, to]; to is 0 while the team runs.
type idWindow struct{ from, to int64 }

func newTeamRuns() *teamRuns {
	return &teamRuns{sessions: map[string]*idWindow{}, runs: map[string]bool{}}
}

// add registers team's member sessions before the team runs, from the gateway mark from (the last
// record id before the team started).
func (t *teamRuns) add(team runtime.Team, from int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := &idWindow{from: from}
	for _, m := range team.Members {
		t.sessions[team.SessionID(m)] = w
	}
	t.runs[team.RunID] = true
}

// close ends team's window at the gateway mark to (the last record id when the team returned).
func (t *teamRuns) close(team runtime.Team, to int64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range team.Members {
		if w := t.sessions[team.SessionID(m)]; w != nil {
			w.to = to
		}
	}
}

// owns reports whether the gateway record id under session belongs to a registered team run: the
// session is one of its members' and the record arrived within its window.
func (t *teamRuns) owns(session string, id int64) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	w := t.sessions[session]
	return w != nil && id > w.from && (w.to == 0 || id <= w.to)
}

// ownsKey reports whether an effect's idempotency key ("{run_id}:{member_id}:{call_id}",
// tool.Call.Key) names a registered team run.
func (t *teamRuns) ownsKey(key string) bool {
	run, _, ok := strings.Cut(key, ":")
	t.mu.Lock()
	defer t.mu.Unlock()
	return ok && t.runs[run]
}

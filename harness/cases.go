package harness

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime"
	"github.com/assay-audit/assay/runtime/effect"
	"github.com/assay-audit/assay/runtime/formation"
	"github.com/assay-audit/assay/runtime/provider/reference"
	"github.com/assay-audit/assay/runtime/tool"
	"github.com/assay-audit/assay/tasks"
)

// Profile is a task profile: what each implementing member must deliver. The files themselves are
// the task's (the task file's deliverables for the language and profile; Case.Files).
type Profile struct {
	// Name is the profile name used on the command line.
	Name string
	// Doc says what the profile asks for.
	Doc string
}

// Profiles returns the task profiles by name.
func Profiles() map[string]Profile {
	return map[string]Profile{
		tasks.ProfileStandard: {Name: tasks.ProfileStandard, Doc: "two files per implementing member: the function and its test"},
		tasks.ProfileSingleFile: {Name: tasks.ProfileSingleFile,
			Doc: "one test file per implementing member that also holds the function; the oracle checks that file"},
	}
}

// ProfileNames returns the profile names, sorted.
func ProfileNames() []string {
	var n []string
	for k := range Profiles() {
		n = append(n, k)
	}
	slices.Sort(n)
	return n
}

// Languages returns the artifact languages the matrix can check, a new slice on every call.
func Languages() []string { return []string{reference.LanguageGo, reference.LanguagePython} }

// MemberTemplate is one member of a catalog entry, before a case gives it a directory and a task.
type MemberTemplate struct {
	ID, Name      string
	DomainRole    string
	FormationRole string
	// Implements: the member writes the profile's deliverables in its own directory with
	// write_file; otherwise it holds read_file only and delivers nothing.
	Implements bool
	// ReadsFrom is, for a member that does not implement, the implementing member whose directory
	// it works in (a critic reads the generator's files); "" gives it its own empty directory.
	ReadsFrom string
	// Optional members need not run (dynamic_router runs only the member it selects).
	Optional bool
	// SatisfiedAt is, for a critic, the reflection iteration from which the reference critic is
	// satisfied (so the case exercises the needs_work loop); 0 for others.
	SatisfiedAt int
	// Publishes: an implementing member that, after writing its files, publishes them to the
	// remote effect service with remote_put (tool.RemotePut, access mode network), which it is
	// allowed; the effects check requires a committed receipt for every publish that succeeded.
	Publishes bool
}

// CatalogEntry is one case of the matrix catalog: a formation (or an ensemble mode of one) with its
// members, options, team task, and the check of the formation's own evidence.
type CatalogEntry struct {
	// Name is the catalog name used by --formations: the formation name, or "parallel+vote" style
	// for an ensemble mode.
	Name string
	// Formation is the registry formation the case runs.
	Formation string
	// Doc says what the case shows.
	Doc     string
	Members []MemberTemplate
	// Options returns the formation options of the case.
	Options func() formation.Options
	// FormationOptions are the operator's settings (NAME=VALUE, Options.FormationOptions) applied
	// over the catalog's options, in order; nil for the catalog's own case. The manifest records
	// them, so the manifest digest binds them.
	FormationOptions []string
	// Task is the team task (routing and splitting read it); "" is the task file's team_task.
	Task string
	// Evidence checks the formation's own evidence in the stored trace.
	Evidence evidenceRule
}

func implementer(id string) MemberTemplate {
	return MemberTemplate{ID: id, Name: "executor " + strings.TrimPrefix(id, "exec-"), DomainRole: "executor", Implements: true}
}

func publisher(id string) MemberTemplate {
	m := implementer(id)
	m.Publishes = true
	return m
}

// publishes reports whether a member of the entry publishes with remote_put.
func (e CatalogEntry) publishes() bool {
	return slices.ContainsFunc(e.Members, func(m MemberTemplate) bool { return m.Publishes })
}

func roleMember(id, role string) MemberTemplate {
	return MemberTemplate{ID: id, Name: role, DomainRole: "reviewer", FormationRole: role}
}

func noOptions() formation.Options { return formation.Options{} }

// Catalog returns the matrix catalog: one case per formation, the three ensemble modes,
// sequential+remote (sequential with remote effects), parallel+capacity (capacity admission) and
// parallel+worktrees (worktree isolation), in this order. The slice is new on every call.
func Catalog() []CatalogEntry {
	ensemble := func(mode string) func() formation.Options {
		return func() formation.Options { return formation.Options{Ensemble: formation.EnsembleOptions{Mode: mode}} }
	}
	return []CatalogEntry{
		{Name: "sequential", Formation: "sequential", Doc: "two executors one after another, the second seeing the first's output",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2")}, Options: noOptions, Evidence: sequentialEvidence},
		{Name: "pipeline", Formation: "pipeline", Doc: "two stages, the second taking the first's output as input",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2")}, Options: noOptions, Evidence: pipelineEvidence},
		{Name: "parallel", Formation: "parallel", Doc: "two executors concurrently in disjoint directories",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2")}, Options: noOptions, Evidence: parallelEvidence},
		{Name: "hierarchical", Formation: "hierarchical", Doc: "a read-only supervisor delegates to two executors and synthesizes",
			Members: []MemberTemplate{roleMember("supervisor", formation.RoleSupervisor), implementer("exec-1"), implementer("exec-2")},
			Options: noOptions, Evidence: hierarchicalEvidence},
		{Name: "consensus", Formation: "consensus", Doc: "two executors propose until their consensus keys agree",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2")}, Options: noOptions, Evidence: consensusEvidence},
		{Name: "reflection", Formation: "reflection", Doc: "a generator writes; a read-only critic reads its files, asks for one revision, then is satisfied",
			Members: []MemberTemplate{{ID: "exec-1", Name: "generator", DomainRole: "executor", FormationRole: formation.RoleGenerator, Implements: true},
				{ID: "critic", Name: "critic", DomainRole: "reviewer", FormationRole: formation.RoleCritic, ReadsFrom: "exec-1", SatisfiedAt: 2}},
			Options: noOptions, Evidence: reflectionEvidence},
		{Name: "dynamic_router", Formation: "dynamic_router", Doc: "the default selector routes an implementation task to the executor among a researcher and a reviewer",
			Members: []MemberTemplate{{ID: "researcher", Name: "researcher", DomainRole: "researcher", Optional: true},
				implementer("exec-1"), {ID: "reviewer", Name: "reviewer", DomainRole: "reviewer", Optional: true}},
			Options: noOptions, Evidence: routerEvidence},
		{Name: "multi_level_hierarchy", Formation: "multi_level_hierarchy", Doc: "root -> lead -> two executors, each leaf given one line of the task",
			Members: []MemberTemplate{roleMember("root", formation.RoleSupervisor), roleMember("lead", formation.RoleSupervisor),
				implementer("exec-1"), implementer("exec-2")},
			Options: func() formation.Options {
				return formation.Options{Hierarchy: formation.HierarchyOptions{Split: "line", Tree: &formation.TreeNode{MemberID: "root",
					Children: []formation.TreeNode{{MemberID: "lead", Children: []formation.TreeNode{{MemberID: "exec-1"}, {MemberID: "exec-2"}}}}}}}
			}, Evidence: multiLevelEvidence},
		{Name: "adaptive", Formation: "adaptive", Doc: "the sequential -> hierarchical -> consensus cycle under the feedback strategy (every completion carries quality_score)",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2")},
			Options: func() formation.Options {
				return formation.Options{Adaptive: formation.AdaptiveOptions{Strategy: formation.StrategyFeedback}}
			}, Evidence: adaptiveEvidence},
		{Name: "group_chat", Formation: "group_chat", Doc: "two executors take round-robin turns until one says done",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2")}, Options: noOptions, Evidence: groupChatEvidence},
		{Name: "debate", Formation: "debate", Doc: "two executors debate for two rounds; a read-only judge gives one verdict",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2"), roleMember("judge", formation.RoleJudge)},
			Options: noOptions, Evidence: debateEvidence},
		{Name: "handoff", Formation: "handoff", Doc: "exec-1 hands off to exec-2, who finishes",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2")}, Options: noOptions, Evidence: handoffEvidence},
		{Name: "parallel+vote", Formation: "parallel", Doc: "ensemble vote: three candidates, strict majority of vote keys",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2"), implementer("exec-3")},
			Options: ensemble(formation.EnsembleVote), Evidence: ensembleEvidence},
		{Name: "parallel+judge", Formation: "parallel", Doc: "ensemble judge: two candidates, a read-only judge selects one",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2"), roleMember("judge", formation.RoleJudge)},
			Options: ensemble(formation.EnsembleJudge), Evidence: ensembleEvidence},
		{Name: "parallel+synthesizer", Formation: "parallel", Doc: "ensemble synthesizer: two candidates, a read-only synthesizer composes the answer",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2"), roleMember("synthesizer", formation.RoleSynthesizer)},
			Options: ensemble(formation.EnsembleSynthesizer), Evidence: ensembleEvidence},
		{Name: "sequential+remote", Formation: "sequential", Doc: "two executors one after another, each publishing what it wrote to a remote " +
			"effect service with remote_put (network); every publish needs a committed receipt, and an effect left unknown rejects the case",
			Members: []MemberTemplate{publisher("exec-1"), publisher("exec-2")}, Options: noOptions, Evidence: sequentialEvidence},
		{Name: "parallel+capacity", Formation: "parallel", Doc: "three executors through two admission slots (capacity_declared=2): " +
			"the third in configuration order waits and records member_throttled; never more than two run at once",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2"), implementer("exec-3")},
			Options: func() formation.Options {
				return formation.Options{Capacity: formation.CapacityOptions{Aware: true, Declared: 2}}
			}, Evidence: parallelEvidence},
		{Name: "parallel+worktrees", Formation: "parallel", Doc: "three executors, each in its own git worktree of a repository the " +
			"harness makes in the case directory (cases/<run>/repo; worktrees under cases/<run>/worktrees, kept for inspection), " +
			"session ids in the colon form {run}:parallel:{member}",
			Members: []MemberTemplate{implementer("exec-1"), implementer("exec-2"), implementer("exec-3")},
			Options: func() formation.Options {
				return formation.Options{Isolation: formation.IsolationOptions{Enabled: true}}
			}, Evidence: parallelEvidence},
	}
}

// CatalogNames returns the catalog names in catalog order.
func CatalogNames() []string {
	var n []string
	for _, e := range Catalog() {
		n = append(n, e.Name)
	}
	return n
}

// LookupCase returns the catalog entry named name; the ensemble modes are also found by their bare
// names (vote, judge, synthesizer). An unknown name is an *OptionError for field Formations
// (ErrBadOptions) naming the catalog.
func LookupCase(name string) (CatalogEntry, error) {
	for _, e := range Catalog() {
		if e.Name == name || e.Name == "parallel+"+name {
			return e, nil
		}
	}
	return CatalogEntry{}, optionErr("Formations", "names unknown formation %q (catalog: %s, or all)", name, strings.Join(CatalogNames(), ", "))
}

// Case is one matrix case: a catalog entry run on a task profile in a language.
type Case struct {
	Entry    CatalogEntry
	Profile  Profile
	Language string
	// Task is the task file the case runs; nil is the built-in default (tasks.Default).
	Task *tasks.Task
	// Repeat is the case's repeat index, 1-based; 0 when the matrix does not repeat.
	Repeat int
}

// task returns the case's task: Task, or the built-in default.
func (c Case) task() *tasks.Task {
	if c.Task != nil {
		return c.Task
	}
	t, err := tasks.Builtin(tasks.Default)
	if err != nil {
		panic("harness: the built-in task does not parse: " + err.Error()) // a build defect; tasks tests parse it
	}
	return t
}

// Files are the deliverables of each implementing member: the task's for the case's language and
// profile.
func (c Case) Files() []string { return c.task().Files(c.Language, c.Profile.Name) }

// Artifact is the file the oracle checks, relative to an implementing member's directory.
func (c Case) Artifact() string { return c.task().Artifact(c.Language, c.Profile.Name) }

// teamTask is the team task the formation sees: the entry's own, or the task file's team_task.
func (c Case) teamTask() string {
	if c.Entry.Task != "" {
		return c.Entry.Task
	}
	return c.task().TeamTask
}

// Name is the case's display name, "entry/profile/language", with "#N" for repeat N.
func (c Case) Name() string {
	n := c.Entry.Name + "/" + c.Profile.Name + "/" + c.Language
	if c.Repeat > 0 {
		n += fmt.Sprintf("#%d", c.Repeat)
	}
	return n
}

// memberPlan is one member of a case with what it must deliver.
type memberPlan struct {
	Spec runtime.MemberSpec
	// Deliverables are the files the member must write (relative to Spec.Dir); empty for members
	// that do not implement.
	Deliverables []string
	// Artifact is the file the oracle checks, "" when the member does not implement.
	Artifact string
	// Optional members need not have run.
	Optional bool
	// Repo is, for a member working in its own git worktree (worktree isolation), the case
	// repository the worktree is of; "" otherwise.
	Repo string
}

// publishTask is what a publishing member is asked to do after writing its files.
func publishTask(memberID string, a reference.Assignment) string {
	lang := a.Language
	if lang == "" {
		lang = reference.LanguageGo
	}
	return fmt.Sprintf("After writing the files, publish them once with the remote_put tool: name %q, value %q. "+
		"Do not publish again if it fails; report the failure.", a.Task+"/"+memberID, a.Task+"/"+lang+"/"+strings.Join(a.Files, ","))
}

// roleTask is the task of a member that does not implement: the task file's assignment for its
// formation role (supervisor, critic, judge, synthesizer), or a generic one for other roles.
func roleTask(task *tasks.Task, t MemberTemplate) string {
	if text, ok := task.RoleAssignment(t.FormationRole); ok {
		return text
	}
	return fmt.Sprintf("You are the team's %s. Answer the request you are given.", t.DomainRole)
}

// plan builds the members of a case under caseDir; with scaffold it creates each member's directory
// and scaffold (a first run), without it it touches nothing (a resumed run, or a plan made only to
// compute the case's manifest).
// Every implementing member writes in its own directory, so concurrent members never share a path.
//
// In a case with worktree isolation each implementing member works in its worktree
// (worktreePath) under the worktree session id; the scaffold is the case repository
// (makeCaseRepo), from which the runtime makes the worktrees.
func (c Case) plan(caseDir, runID string, scaffold bool) ([]memberPlan, error) {
	task := c.task()
	files := c.Files()
	if len(files) == 0 {
		return nil, fmt.Errorf("case %s: task %s declares no %s deliverables for profile %s", c.Name(), task.Name, c.Language, c.Profile.Name)
	}
	isolated := c.Entry.Options().Isolation.Enabled
	if isolated && scaffold {
		if err := makeCaseRepo(context.Background(), caseDir, c.Language, task.GoModule()); err != nil {
			return nil, fmt.Errorf("case %s: %w", c.Name(), err)
		}
	}
	assignment := reference.Assignment{Task: task.Name, Language: c.Language, Files: files}
	if c.Language == reference.LanguageGo {
		assignment.Package = task.Package
	}
	implement, err := task.ExecutorAssignment(c.Language, files)
	if err != nil {
		return nil, fmt.Errorf("case %s: task %s: %w", c.Name(), task.Name, err)
	}
	dirs := map[string]string{}
	for _, t := range c.Entry.Members {
		if t.ReadsFrom != "" {
			continue
		}
		dir := filepath.Join(caseDir, t.ID)
		if isolated && t.Implements {
			dir = worktreePath(caseDir, runID, t.ID)
		}
		dirs[t.ID] = dir
		if !scaffold || isolated && t.Implements {
			continue // a resumed case works in the directories its first run made, as they are
		}
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return nil, fmt.Errorf("case %s: member directory: %w", c.Name(), err)
		}
		if t.Implements && c.Language == reference.LanguageGo {
			if err := os.WriteFile(filepath.Join(dir, "go.mod"), []byte(task.GoModule()), 0o644); err != nil {
				return nil, fmt.Errorf("case %s: scaffold go.mod: %w", c.Name(), err)
			}
		}
	}
	var plans []memberPlan
	for _, t := range c.Entry.Members {
		spec := runtime.MemberSpec{ID: t.ID, Name: t.Name, DomainRole: t.DomainRole, FormationRole: t.FormationRole,
			Goal: "You are a member of a software team. You act only through the tools you are given; your working directory is private to you.",
			Dir:  dirs[t.ID], Idempotent: true}
		p := memberPlan{Optional: t.Optional}
		if t.Implements {
			spec.Task = implement + "\n" + reference.FormatAssignment(assignment)
			spec.AllowedTools = []string{"write_file", "read_file"}
			if t.Publishes {
				spec.Task = implement + "\n" + publishTask(t.ID, assignment) + "\n" + reference.FormatAssignment(assignment)
				spec.AllowedTools = append(spec.AllowedTools, tool.RemotePutName)
			}
			p.Deliverables, p.Artifact = files, c.Artifact()
		} else {
			spec.Task = roleTask(task, t)
			spec.AllowedTools = []string{"read_file"}
			if t.ReadsFrom != "" {
				d, ok := dirs[t.ReadsFrom]
				if !ok {
					return nil, fmt.Errorf("case %s: member %s reads from unknown member %s", c.Name(), t.ID, t.ReadsFrom)
				}
				spec.Dir = d
			}
			if t.SatisfiedAt > 0 {
				a := assignment
				a.SatisfiedAt = t.SatisfiedAt
				spec.Task += "\n" + reference.FormatAssignment(a)
			}
		}
		p.Spec = spec
		if isolated && t.Implements {
			isolate(&p, caseDir, runID, c.Entry.Formation)
		}
		plans = append(plans, p)
	}
	return plans, nil
}

// oracleSpec is the oracle spec for a case: the task's, in the case's language (oracleSpecFor).
func (c Case) oracleSpec() (oracle.Spec, error) {
	return oracleSpecFor(c.task(), c.Language, c.Profile.Name)
}

// oracleSpecFor is task's oracle spec in language for profile. The single-file Go profile's artifact
// is a _test.go file, which must import "testing"; that import is allowed for it (the package
// offers a test binary's API, not file or process access without "flag" and "os", which stay
// forbidden).
func oracleSpecFor(task *tasks.Task, language, profile string) (oracle.Spec, error) {
	spec, err := task.Spec(language)
	if err != nil {
		return spec, err
	}
	if language == reference.LanguageGo && strings.HasSuffix(task.Artifact(language, profile), "_test.go") {
		imports := spec.Imports
		if imports == nil {
			imports = oracle.DefaultImports()
		}
		spec.Imports = append(slices.Clone(imports), "testing")
	}
	return spec, nil
}

// EffectsDBName is the file, in the output directory, where the embedded effect service keeps its
// receipts and committed values (reference.Config.EffectsDB).
const EffectsDBName = "reference-effects.db"

// EffectsDBPath returns the effect service's database in the output directory outDir.
func EffectsDBPath(outDir string) string { return filepath.Join(outDir, EffectsDBName) }

// caseTools returns the tools the engine of a case knows: tool.Builtins(), plus remote_put sending
// to the run's effect service (env.effectsURL) when a member of entry publishes. Members still see
// only their allowed tools. Resume uses it through executeCase, so a resumed case has the same tools.
func caseTools(env caseEnv, entry CatalogEntry) map[string]tool.Tool {
	tools := tool.Builtins()
	if entry.publishes() && env.effectsURL != "" {
		tools[tool.RemotePutName] = tool.RemotePut(env.effectsURL, nil)
	}
	return tools
}

// caseBackendOptions returns the boundary option that lets reconciliation (Boundary.Reconcile, and
// so assay resume) ask the run's effect service for receipts: tool.WithBackend over
// effect.HTTPBackend, or over env.backend when one is set; none when the run has no effect service.
func caseBackendOptions(env caseEnv) []tool.Option {
	if env.backend != nil {
		return []tool.Option{tool.WithBackend(env.backend)}
	}
	if env.effectsURL == "" {
		return nil
	}
	return []tool.Option{tool.WithBackend(effect.NewHTTPBackend(env.effectsURL, nil))}
}

// OpenEffectsBackend opens the effect service's database in the output directory outDir directly,
// read-only: the receipt lookup (an effect.Backend) that works after the provider that served the
// effects is gone (assay reconcile --lookup, assay resume). The caller closes it. It returns
// reference.ErrNoEffectsDB (wrapped, matching fs.ErrNotExist) when no effect service ever ran there.
func OpenEffectsBackend(ctx context.Context, outDir string) (*reference.EffectsReader, error) {
	return reference.OpenEffectsReader(ctx, EffectsDBPath(outDir))
}

// startEffectService returns the base URL of the run's effect service. With the embedded reference
// provider (embedded true, refURL its base URL) it is the provider's own, serving
// EffectsDBPath(opts.OutDir). With a base URL and a selected case that publishes, a reference
// server is started for its effect service alone on the same database, and its Close is appended
// to closers. Otherwise there is none ("").
func startEffectService(ctx context.Context, opts Options, embedded bool, refURL string, closers *[]func()) (string, error) {
	if embedded {
		return refURL, nil
	}
	for _, name := range opts.Formations {
		if e, err := LookupCase(name); err == nil && e.publishes() {
			eff, err := reference.Start(ctx, reference.Config{EffectsDB: EffectsDBPath(opts.OutDir)})
			if err != nil {
				return "", fmt.Errorf("start the effect service: %w", err)
			}
			*closers = append(*closers, func() { _ = eff.Close() })
			return eff.BaseURL(), nil
		}
	}
	return "", nil
}

// knownTools is every tool a case's engine can have (caseTools of any entry), for checking policy
// files: remote_put's URL is irrelevant there.
func knownTools() map[string]tool.Tool {
	tools := tool.Builtins()
	tools[tool.RemotePutName] = tool.RemotePut("", nil)
	return tools
}

// Refusals of ReconcileThroughLookup.
var (
	// ErrNoReceipt: the effect service has no receipt for the effect's idempotency key. Nothing
	// committed under it, or not yet; the effect stays unknown (an operator decides, or a later
	// lookup).
	ErrNoReceipt = errors.New("no receipt for the effect")
	// ErrReceiptPayloadMismatch: the service committed another payload under the effect's key. It is
	// evidence for another action, not for this one (SAFETY.md rule 12), and resolves nothing.
	ErrReceiptPayloadMismatch = errors.New("the receipt is for another payload")
)

// ReconcileThroughLookup resolves effect e — unknown, as tool.Replay established it from a run's
// evidence — through the receipt lookup of db, the effect service's database, and returns the
// outcome to record (Source "reconciliation", with the receipt): succeeded when the receipt says
// committed, failed when it says not. The state change goes through effect.Ledger, the one
// transition guard (an effect that is not unknown is refused; a receipt naming another key is
// effect.ErrUnrelatedReceipt). It records nothing itself. Errors: ErrNoReceipt (e stays unknown),
// ErrReceiptPayloadMismatch, effect.ErrIllegalTransition or effect.ErrLate, and the database's
// error when it could not be read.
func ReconcileThroughLookup(ctx context.Context, db *reference.EffectsReader, e tool.Effect) (tool.Outcome, error) {
	rc, found, err := db.Receipt(ctx, e.IdempotencyKey)
	if err != nil {
		return tool.Outcome{}, err
	}
	if found && e.PayloadSHA256 != "" && rc.PayloadSHA256 != e.PayloadSHA256 {
		return tool.Outcome{}, fmt.Errorf("%w: effect %s: the service committed payload sha256 %s under its key, the intent's is %s",
			ErrReceiptPayloadMismatch, e.IdempotencyKey, rc.PayloadSHA256, e.PayloadSHA256)
	}
	l := effect.NewLedger(db, nil)
	if err := l.Add(e.IdempotencyKey, e.State); err != nil {
		return tool.Outcome{}, err
	}
	if e.State != effect.Unknown {
		_, err := l.Apply(e.IdempotencyKey, effect.Event{Kind: effect.Reconcile, To: effect.Succeeded})
		return tool.Outcome{}, fmt.Errorf("effect %s is %s, not unknown: %w", e.IdempotencyKey, e.State, err)
	}
	rec, err := l.Reconcile(ctx, e.IdempotencyKey, nil)
	if err != nil {
		return tool.Outcome{}, err
	}
	if rec.State == effect.Unknown || rec.Receipt == nil {
		return tool.Outcome{}, fmt.Errorf("%w: %s in %s", ErrNoReceipt, e.IdempotencyKey, db.Path())
	}
	out := tool.Outcome{RunID: e.RunID, MemberID: e.MemberID, SessionID: e.SessionID, CallID: e.CallID,
		IdempotencyKey: e.IdempotencyKey, Tool: e.Tool, State: string(rec.State), Source: "reconciliation", Mode: e.Mode,
		Receipt: rec.Receipt, Revision: e.Intent.Revision, Attempts: max(e.Intent.Attempt, 1),
		Note: fmt.Sprintf("receipt lookup in %s: receipt %s, %d PUT(s) received", db.Path(), rc.Reference, rc.Puts)}
	if rec.State == effect.Succeeded {
		out.Result = fmt.Sprintf("committed: receipt %s at %s", rc.Reference, rc.Time.Format(time.RFC3339Nano))
	} else {
		out.Error = "the effect service's receipt says it was not committed"
	}
	return out, nil
}

// checkEffectFaults refuses an http_500_after_commit or hang_after_commit fault that cannot fire: its member (any member
// when it names none) publishes with remote_put in none of the selected cases.
func (o *Options) checkEffectFaults() error {
	var publishers []string
	for _, name := range o.Formations {
		e, err := LookupCase(name)
		if err != nil {
			return err
		}
		for _, m := range e.Members {
			if m.Publishes && !slices.Contains(publishers, m.ID) {
				publishers = append(publishers, m.ID)
			}
		}
	}
	for _, f := range o.ReferenceFaults {
		if (f.Kind != reference.FaultHTTP500AfterCommit && f.Kind != reference.FaultHangAfterCommit) || (f.Member == "" && len(publishers) > 0) || slices.Contains(publishers, f.Member) {
			continue
		}
		who := "member " + strconv.Quote(f.Member)
		if f.Member == "" {
			who = "any member"
		}
		return optionErr("ReferenceFaults", "name a %s fault for %s, which publishes with remote_put in no selected case (select sequential+remote)",
			f.Kind, who)
	}
	return nil
}

package harness

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"path/filepath"
	goruntime "runtime"
	"runtime/debug"
	"time"

	"github.com/gowebpki/jcs"

	"github.com/assay-audit/assay/evidence"
	"github.com/assay-audit/assay/internal/runid"
	"github.com/assay-audit/assay/oracle"
	"github.com/assay-audit/assay/runtime"
)

// manifest is what a case's manifest digest covers: everything that defines the case before it runs.
type manifest struct {
	Catalog   string         `json:"catalog"`
	Formation string         `json:"formation"`
	Options   map[string]any `json:"options"`
	// FormationOptions are the operator's NAME=VALUE settings over the catalog's options (absent
	// when there are none, so a catalog case's digest is what it always was).
	FormationOptions []string `json:"formation_options,omitempty"`
	// Task is the task file the case runs (name and SHA-256 of its bytes, stored as TaskArtifact).
	Task         taskManifest         `json:"task"`
	TeamTask     string               `json:"team_task"`
	Profile      string               `json:"profile"`
	Language     string               `json:"language"`
	Provider     string               `json:"provider"`
	Model        string               `json:"model"`
	Stream       bool                 `json:"stream"`
	Members      []runtime.MemberSpec `json:"members"`
	Deliverables map[string][]string  `json:"deliverables"`
	Checks       []string             `json:"checks"`
	OracleSpec   oracleManifest       `json:"oracle_spec"`
}

// oracleManifest is the part of an oracle spec that defines what it checks (the reference itself is
// code, identified by the spec's name and reference expression).
type oracleManifest struct {
	Name      string          `json:"name"`
	Language  string          `json:"language"`
	File      string          `json:"file"`
	Function  string          `json:"function"`
	Reference string          `json:"reference"`
	Domains   []oracle.Domain `json:"domains"`
	Imports   []string        `json:"imports,omitempty"`
	Checks    int             `json:"checks"`
}

func newOracleManifest(s oracle.Spec) oracleManifest {
	return oracleManifest{Name: s.Name, Language: s.Language, File: s.File, Function: s.Function,
		Reference: s.Reference.GoExpr, Domains: s.Domains, Imports: s.Imports, Checks: s.Expected()}
}

// manifestArtifact is the name a case run's manifest is stored under.
const manifestArtifact = "manifest.json"

// prepareCase builds what defines case c for the team run identityRunID: the member directories
// under OUT/cases/identityRunID (created and scaffolded only with scaffold), the plans, the oracle
// spec, the team, the manifest and the envelope binding its digest. It writes no evidence.
func prepareCase(opts Options, c Case, identityRunID string, scaffold bool) (caseRun, manifest, evidence.Envelope, error) {
	caseDir, err := filepath.Abs(filepath.Join(opts.OutDir, "cases", identityRunID))
	if err != nil {
		return caseRun{}, manifest{}, evidence.Envelope{}, err
	}
	return prepareCaseIn(opts, c, identityRunID, caseDir, scaffold)
}

// prepareCaseIn is prepareCase with the members' directories under caseDir (a replay works in its
// own directories; nothing that defines the case depends on where they are).
func prepareCaseIn(opts Options, c Case, identityRunID, caseDir string, scaffold bool) (caseRun, manifest, evidence.Envelope, error) {
	plans, err := c.plan(caseDir, identityRunID, scaffold)
	if err != nil {
		return caseRun{}, manifest{}, evidence.Envelope{}, err
	}
	spec, err := c.oracleSpec()
	if err != nil {
		return caseRun{}, manifest{}, evidence.Envelope{}, fmt.Errorf("oracle spec: %w", err)
	}
	fopts := caseOptions(c.Entry, caseDir)
	task := c.teamTask()
	team := runtime.Team{RunID: identityRunID, Formation: c.Entry.Formation, Task: task}
	m := manifest{Catalog: c.Entry.Name, Formation: c.Entry.Formation, Options: manifestOptions(fopts), FormationOptions: c.Entry.FormationOptions, TeamTask: task,
		Task:    taskManifest{Name: c.task().Name, SHA256: c.task().SHA256, ReferenceSolution: opts.BaseURL == ""},
		Profile: c.Profile.Name, Language: c.Language, Provider: upstreamLabel(opts),
		Model: opts.Model, Stream: opts.Stream, Deliverables: map[string][]string{}, OracleSpec: newOracleManifest(spec)}
	for _, p := range plans {
		team.Members = append(team.Members, p.Spec)
		spec := p.Spec
		// Directories are per-run locations, not part of what defines the case; so is a worktree
		// session id, which holds the run id.
		spec.Dir, spec.SessionID = "", ""
		m.Members = append(m.Members, spec)
		m.Deliverables[p.Spec.ID] = p.Deliverables
	}
	for _, ch := range Checks() {
		m.Checks = append(m.Checks, ch.Name)
	}
	manifestDigest, err := digestJSON(m)
	if err != nil {
		return caseRun{}, manifest{}, evidence.Envelope{}, err
	}
	envelope := evidence.Envelope{
		Tenant: opts.Tenant, ManifestDigest: manifestDigest, Mode: opts.Mode, PolicyDigest: opts.policyDigest,
		EnvironmentFingerprint: environmentFingerprint(opts.ToolVersion),
		Case:                   c.Entry.Name, InvocationID: opts.InvocationID, Task: c.task().Name, Repeat: c.Repeat,
		EntropySources:  []string{"provider_responses", "wall_clock", "run_id"},
		ReplayTolerance: opts.ReplayTolerance,
		Provider:        providerName(opts), BaseURL: opts.BaseURL, Model: opts.Model,
		Formation: c.Entry.Formation, TaskProfile: c.Profile.Name, Language: c.Language,
	}
	return caseRun{caseDir: caseDir, plans: plans, spec: spec, team: team, fopts: fopts}, m, envelope, nil
}

// newRunID returns a globally unique run id, "run-20261130t101500-0a1b2c3d4e5f" (internal/runid):
// UTC time to the second plus 48 random bits, so ids sort by creation and never repeat across
// machines or restarts.
func newRunID() string { return runid.New("run-", time.Now()) }

// NewInvocationID returns a globally unique invocation id, "inv-20261201t215000-0a1b2c3d4e5f"
// (internal/runid), for Options.InvocationID: one per CLI invocation.
func NewInvocationID() string { return runid.New("inv-", time.Now()) }

// providerName is the provider the envelope names: Options.ProviderName (a matrix file's provider
// name) when set, else upstreamLabel's.
func providerName(o Options) string {
	if o.ProviderName != "" {
		return o.ProviderName
	}
	return upstreamLabel(o)
}

func upstreamLabel(o Options) string {
	if o.BaseURL == "" {
		return ReferenceProviderName
	}
	return o.BaseURL
}

// CurrentEnvironment is the fingerprint preimage of this process (evidence.Environment, version 2):
// assay's version toolVersion, the Go toolchain, GOOS/GOARCH and the build's version control facts
// (runtime/debug.ReadBuildInfo's vcs.revision, vcs.time, vcs.modified) where it recorded them, ""
// (nil for VCSModified) where it did not. `assay version` prints the same facts.
func CurrentEnvironment(toolVersion string) evidence.Environment {
	env := evidence.Environment{FingerprintVersion: evidence.EnvironmentFingerprintV2, Assay: toolVersion,
		Go: goruntime.Version(), GOOS: goruntime.GOOS, GOARCH: goruntime.GOARCH}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			switch s.Key {
			case "vcs.revision":
				env.VCSRevision = s.Value
			case "vcs.time":
				env.VCSTime = s.Value
			case "vcs.modified":
				m := s.Value == "true"
				env.VCSModified = &m
			}
		}
	}
	return env
}

// environmentFingerprint is SHA-256 hex over the canonical preimage of CurrentEnvironment, which each
// case run also stores as evidence.EnvironmentArtifact.
func environmentFingerprint(toolVersion string) string {
	d, _ := CurrentEnvironment(toolVersion).Fingerprint()
	return d
}

// putEnvironment links the canonical preimage of the run's environment fingerprint to run runID, so a
// report re-derives the fingerprint from it.
func putEnvironment(ctx context.Context, store *evidence.Store, runID, toolVersion string) error {
	b, err := CurrentEnvironment(toolVersion).Canonical()
	if err != nil {
		return err
	}
	if _, err := store.PutArtifact(ctx, runID, evidence.EnvironmentArtifact, "application/json", b); err != nil {
		return fmt.Errorf("run %s: store environment: %w", runID, err)
	}
	return nil
}

// digestJSON is SHA-256 hex of the RFC 8785 canonical JSON of v.
func digestJSON(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", err
	}
	c, err := jcs.Transform(b)
	if err != nil {
		return "", err
	}
	sum := sha256.Sum256(c)
	return hex.EncodeToString(sum[:]), nil
}

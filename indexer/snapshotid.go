package indexer

import (
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"strings"
)

// snapshotInputs is what Snapshot.ID hashes. Field order is fixed by the
// struct, slices are sorted, so the JSON encoding is deterministic.
type snapshotInputs struct {
	SchemaVersion int          `json:"schema_version"`
	ToolVersion   string       `json:"tool_version"`
	GoVersion     string       `json:"go_version"`
	GOOS          string       `json:"goos"`
	GOARCH        string       `json:"goarch"`
	CGOEnabled    string       `json:"cgo_enabled"`
	GOFLAGS       string       `json:"goflags"`
	Tests         bool         `json:"tests"`
	Patterns      []string     `json:"patterns"`
	Tags          []string     `json:"tags"`
	ModulePaths   []string     `json:"module_paths"`
	VCSRevision   string       `json:"vcs_revision"`
	VCSDirty      bool         `json:"vcs_dirty"`
	Packages      []string     `json:"packages"`
	Files         []fileDigest `json:"files"`
	// CToolchain is CC, CXX, the CGO_*FLAGS and PKG_CONFIG: they decide
	// what cgo generates, and whether a cgo package loads at all.
	CToolchain []string `json:"c_toolchain"`
	// ModuleFiles are the main modules' go.mod and go.sum (module-qualified
	// paths): they decide the dependencies the packages were checked against.
	ModuleFiles []fileDigest `json:"module_files"`
	// LoadErrors are the recorded load errors (go id, kind, message with
	// the indexed directory written "."), in recorded order: two loads of
	// the same files that failed differently are two snapshots.
	LoadErrors []string `json:"load_errors"`
}

// fileDigest names one source file by its module-qualified path and content.
type fileDigest struct {
	Path   string `json:"path"`
	SHA256 string `json:"sha256"`
}

// snapshotID computes Snapshot.ID from the snapshot's inputs.
func snapshotID(s Snapshot, env goEnv, g *graph) (string, error) {
	in := snapshotInputs{
		SchemaVersion: SchemaVersion,
		ToolVersion:   s.ToolVersion,
		GoVersion:     env.GoVersion,
		GOOS:          env.GOOS,
		GOARCH:        env.GOARCH,
		CGOEnabled:    env.CGOEnabled,
		GOFLAGS:       env.GOFLAGS,
		Tests:         s.Tests,
		Patterns:      s.Patterns,
		Tags:          s.Tags,
		ModulePaths:   s.ModulePaths,
		VCSRevision:   s.VCSRevision,
		VCSDirty:      s.VCSDirty && s.VCSRevision != "",
		Files:         g.sourceDigests(),
	}
	for _, p := range g.packages {
		in.Packages = append(in.Packages, p.goID)
	}
	in.CToolchain = []string{env.CC, env.CXX, env.CGOCFLAGS, env.CGOCPPFLAGS, env.CGOCXXFLAGS, env.CGOFFLAGS, env.CGOLDFLAGS, env.PKGCONFIG}
	in.ModuleFiles = g.moduleFileDigests()
	for _, e := range g.loadErrors {
		msg := e.message
		if s.Dir != "" {
			msg = strings.ReplaceAll(msg, s.Dir, ".")
		}
		in.LoadErrors = append(in.LoadErrors, e.goID+"\x00"+e.kind+"\x00"+msg)
	}
	b, err := json.Marshal(in)
	if err != nil {
		return "", fmt.Errorf("indexer: encode snapshot inputs: %w", err)
	}
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:]), nil
}

package oracle

import "os"

// MinimalEnv returns the complete environment for member-code subprocesses,
// as "KEY=value" entries: PATH, HOME, GOCACHE, GOPATH, GOMODCACHE, GOROOT and
// TMPDIR copied from the current process when set, followed by
// GOFLAGS=-mod=mod, GOPROXY=off, GOTOOLCHAIN=local, GOWORK=off and
// CGO_ENABLED=0, which replace any value the current process has. Nothing
// else is passed: no provider credentials, no gateway variables, no ASSAY_*
// variables. The go tool derives an unset GOCACHE from HOME.
//
// The fixed variables pin the go tool to an offline, local mode: modules
// resolve only from the module cache, no toolchain is downloaded, no
// workspace file of a parent directory applies, and no C toolchain is used.
//
// It returns a fresh slice on every call and is safe for concurrent use.
func MinimalEnv() []string {
	inherited := []string{"PATH", "HOME", "GOCACHE", "GOPATH", "GOMODCACHE", "GOROOT", "TMPDIR"}
	fixed := []string{"GOFLAGS=-mod=mod", "GOPROXY=off", "GOTOOLCHAIN=local", "GOWORK=off", "CGO_ENABLED=0"}
	env := make([]string, 0, len(inherited)+len(fixed))
	for _, key := range inherited {
		if value, ok := os.LookupEnv(key); ok {
			env = append(env, key+"="+value)
		}
	}
	return append(env, fixed...)
}

// Package oracle decides whether a member's artifact is correct without
// trusting the member's own tests, and runs member-written tests
// independently.
//
// # Finite-domain oracle
//
// [Check] enumerates every input of a spec's finite domain, runs the
// artifact on each one in a bounded subprocess, and compares the outputs
// exactly with a trusted reference evaluated in the oracle's own process. A
// verdict is "passed" only when the driver exited 0, wrote one complete report
// whose check count equals the spec's, the outputs in that report agree with
// the reference, no process of the run outlived it, and the artifact and
// every generated file hash the same (SHA-256) before and after. Every other
// outcome is a named verdict, never a pass.
//
// A [Spec] is a descriptor: name, per-language targets (file and function),
// parameter names, domains (one per input type, each a cartesian product of
// argument ranges), the reference (Go functions for the oracle, Go and Python
// expressions for the drivers' first pass) and a signed-zero rule. The
// built-in specs are [DoubleSpec], [AbsSpec] and the two-argument
// [ClampSpec]; [Spec.ForLanguage] and [LanguageOf] pick the variant for a
// file.
//
// Go artifacts are copied into a generated module and built with a driver
// that instantiates the generic function once per domain type; a process
// builds that driver once per byte-identical set of build inputs (go tool,
// environment, flags, go.mod, driver source, artifact name and bytes) and
// writes the binary into each later check's directory, noting it in
// build.log, while the driver still runs once per check. Python
// artifacts run under `python3 -I -S -B` with a generated driver: no site
// packages, no user site, no PYTHON* variables, no script directory on
// sys.path. An int input must give exactly an int within int64 (not a bool),
// a float input exactly a float; other outputs are failures. The driver
// shares a process with the artifact, so its report is not trusted: it
// carries every output and the oracle recomputes every comparison. That
// alone cannot catch an artifact whose function is wrong but whose init code
// writes a report of correct outputs and exits: so before anything runs, the
// artifact's source is checked against the spec's import allowance
// ([Spec.Imports], "math" for the built-in specs; in Python attributes are
// allowed only on an allowed module, and names with "__" and the builtins
// that reach the interpreter are refused) and against state kept across calls
// (Go package-level variables and init; Python module-level code, classes,
// global/nonlocal, non-constant defaults), which could make a function right
// for exactly the calls the oracle makes. Anything outside it is
// [VerdictForbiddenImport]. A pure numeric function
// needs nothing else; [Spec.AnyImport] lifts the restriction only to test the
// run-time defenses.
//
// [FindPython] chooses the interpreter deliberately: the first python3 in
// PATH order that runs, is 3.8 or later and, for pytest, imports pytest; it
// is resolved once through sys.executable (so a pyenv shim is not re-run) and
// named in every result.
//
// # Bounded runner
//
// [Run] starts a command in its own process group with a complete, explicit
// environment ([MinimalEnv] for Go, PATH/HOME/TMPDIR for Python), sends its
// output to a file (never a pipe, so a grandchild holding the output open
// cannot hang the caller) of bounded size, kills the whole group on deadline,
// cancellation or output overflow, and reports processes left behind as a
// cleanup fault. [RunGoTest] runs `go test -count=1 -trimpath -json ./...` and counts
// tests from the test2json events; [RunPytest] runs
// `python3 -I -B -m pytest -q -p no:cacheprovider` and counts from pytest's
// summary line. Both return a [TestRunResult]. A passing member test never
// substitutes for the oracle: callers record both as separate checks.
//
// The package is Unix-only (process groups). Group liveness starts with
// kill(-pgid, 0): no process at all means gone. On Linux a group that exists
// is then read from /proc so that zombies awaiting their reaper do not count
// as alive; elsewhere existence is the answer. A process that leaves the group (setsid,
// setpgid) is outside what the runner can see or kill.
package oracle

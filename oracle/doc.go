// Package oracle decides whether a member's artifact is correct without
// trusting the member's own tests, and runs member-written tests
// independently.
//
// The finite-domain oracle ([Check]) enumerates every input of a finite
// domain, runs the artifact on each one in a bounded subprocess, and compares
// the outputs exactly with a trusted reference evaluated in the oracle's own
// process. A verdict is "passed" only when the driver exited 0, wrote one
// complete report whose check count equals the spec's, the outputs in that
// report agree with the reference, no process of the run outlived it, and the
// artifact and every generated file hash the same (SHA-256) before and after.
// Every other outcome is a named verdict, never a pass.
//
// The bounded runner ([Run]) starts a command in its own process group with a
// complete, explicit environment ([MinimalEnv]), sends its output to a file
// (never a pipe, so a grandchild holding the output open cannot hang the
// caller), kills the whole group on deadline or cancellation, and reports
// processes left behind as a cleanup fault. [RunGoTest] uses it to run
// `go test -json` in a member's module and counts tests from the test2json
// events.
//
// The package is Unix-only (process groups). On Linux, group liveness is read
// from /proc so that zombies awaiting their reaper do not count as alive;
// elsewhere kill(-pgid, 0) is used. A process that leaves the group (setsid,
// setpgid) is outside what the runner can see or kill.
package oracle

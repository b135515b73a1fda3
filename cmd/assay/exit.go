package main

import (
	"errors"
	"fmt"

	"github.com/assay-audit/assay/evidence"
)

// fixes are what a user of this command line does about a library error: the libraries say what
// went wrong in their own terms (an OpenOptions.Wait, a Migrate) and the command names its flags
// and commands. Each applies when its error is in the chain; fix returns "" when it has nothing to
// add.
var fixes = []func(err error) string{
	func(err error) string {
		if errors.Is(err, evidence.ErrLocked) {
			return "wait for it or pass --wait DURATION"
		}
		return ""
	},
	func(err error) string {
		var se *evidence.SchemaVersionError
		if errors.As(err, &se) && se.Found < se.Supported {
			return "upgrade it with: assay store migrate --store " + se.Path
		}
		return ""
	},
}

// withFixes appends to msg, the one line printed for err, the fixes that apply to it.
func withFixes(msg string, err error) string {
	for _, f := range fixes {
		if fix := f(err); fix != "" {
			msg = fmt.Sprintf("%s; %s", msg, fix)
		}
	}
	return msg
}

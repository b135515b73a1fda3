package indexer

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// databaseCompanions are the suffixes of the files that go with a graph
// database at DB: its lock and SHA-256 record (Index) and SQLite's journal
// files.
var databaseCompanions = []string{"-lock", "-sha256", "-journal", "-wal", "-shm"}

// tempSuffix matches what follows ".DB.tmp-" in the name of a temporary
// database or SHA-256 record (os.CreateTemp's random digits), with its
// journal.
var tempSuffix = regexp.MustCompile(`^(sha256-)?[0-9]+(-journal)?$`)

// isDatabaseFile reports whether name, an entry of the database's
// directory, is the database dbBase itself, one of its companions
// (databaseCompanions) or one of its temporary files (.DB.tmp-DIGITS,
// .DB.tmp-sha256-DIGITS, and their journals). regular says whether the
// entry is a regular file: only the database itself may be anything else
// (Index refuses it then). Names are compared exactly: a source file or
// package directory named like "DB-x.go" is not the database's.
func isDatabaseFile(name, dbBase string, regular bool) bool {
	if name == dbBase {
		return true
	}
	if !regular {
		return false
	}
	if rest, ok := strings.CutPrefix(name, dbBase); ok {
		for _, c := range databaseCompanions {
			if rest == c {
				return true
			}
		}
		return false
	}
	if rest, ok := strings.CutPrefix(name, "."+dbBase+".tmp-"); ok {
		return tempSuffix.MatchString(rest)
	}
	return false
}

// removeStaleTemporaries removes the temporary files of the database at
// dbPath (.NAME.tmp-DIGITS, .NAME.tmp-sha256-DIGITS and their journals:
// isDatabaseFile) that a killed run left: only the lock's holder writes
// them, so under the lock none is in use.
func removeStaleTemporaries(dbPath string) {
	dir, base := filepath.Dir(dbPath), filepath.Base(dbPath)
	entries, err := os.ReadDir(dir)
	if err != nil {
		return
	}
	for _, e := range entries {
		if name := e.Name(); strings.HasPrefix(name, "."+base+".tmp-") && isDatabaseFile(name, base, e.Type().IsRegular()) {
			_ = os.Remove(filepath.Join(dir, name))
		}
	}
}

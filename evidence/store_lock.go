package evidence

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/assay-audit/assay/internal/filelock"
)

// lockRetry is how often a waiting Open retries the lock file.
const lockRetry = 25 * time.Millisecond

func (s *Store) lockPath() string { return s.path + ".lock" }

// acquireLock takes the exclusive (writer) or shared (reader) lock on
// <path>.lock (internal/filelock), waiting up to opts.Wait; a writer
// records "pid command" in it. A reader in a directory where the lock file
// does not exist and cannot be created goes on without it: no writer can
// hold it either.
func (s *Store) acquireLock(ctx context.Context, opts OpenOptions) error {
	if opts.ReadOnly {
		// A reader creates nothing: without a lock file no assay writer holds
		// the store (a writer creates it before it opens the database), and
		// DuckDB's own file lock refuses a writer that starts meanwhile.
		if _, err := os.Lstat(s.lockPath()); errors.Is(err, fs.ErrNotExist) {
			return nil
		}
	}
	l, err := filelock.Acquire(ctx, s.lockPath(), filelock.Options{Shared: opts.ReadOnly, Wait: opts.Wait,
		Retry: lockRetry, Command: opts.Command})
	var held *filelock.HeldError
	switch {
	case err == nil:
		s.lock = l
		return nil
	case opts.ReadOnly && errors.Is(err, filelock.ErrCannotCreate):
		return nil
	case errors.As(err, &held):
		return &LockedError{Path: s.path, PID: held.PID, Command: held.Command}
	}
	return fmt.Errorf("evidence: lock %s: %w", s.path, err)
}

// releaseLock lets go of the lock, emptying the lock file first so that
// nobody is later told a finished process holds the store.
func (s *Store) releaseLock() error {
	if s.lock == nil {
		return nil
	}
	err := s.lock.Release()
	s.lock = nil
	if err != nil {
		return fmt.Errorf("evidence: %w", err)
	}
	return nil
}

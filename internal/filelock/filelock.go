// Package filelock is the one lock file of assay's databases: an advisory
// flock(2) (github.com/gofrs/flock) on a file beside the database, that
// holds the holder's process id (and command) for the message of whoever
// it turns away.
//
// Only a lock held on the file counts: the kernel drops it when the holder
// exits, however it exits, so a file left behind by a crash means nothing.
// The path is hardened against what else can be there: a symbolic link
// (writing the holder would write through it), a FIFO or device (opening it
// would block), a directory, a hard link (writing the holder would write
// into its other names) and a regular file that does not hold a holder
// record (someone's notes) are refused with ErrUnusablePath and left as they
// are. The file is opened without following a link and without blocking, so
// something put at the path after that check is refused too, once locked.
package filelock

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/gofrs/flock"

	"github.com/assay-audit/assay/internal/safefile"
)

// ErrUnusablePath is returned (wrapped, naming the path and what is there)
// when something other than a lock file is at the lock's path.
var ErrUnusablePath = errors.New("unusable lock path")

// ErrHeld is what a *HeldError unwraps to.
var ErrHeld = errors.New("lock held by another process")

// ErrCannotCreate is returned (wrapped, with the file system's error) when
// the lock file does not exist and its directory refuses to create it
// (permission, read-only file system): no other process can hold it then
// either, which a reader may take as leave to go on without it.
var ErrCannotCreate = errors.New("lock file cannot be created")

// HeldError reports that another holder has the lock: Acquire was not asked
// to wait, or its wait ran out.
type HeldError struct {
	// Path is the lock file.
	Path string
	// PID and Command are what the holder recorded: 0 and "" when it
	// recorded nothing (yet), or holds a shared lock.
	PID     int
	Command string
}

func (e *HeldError) Error() string {
	return fmt.Sprintf("%s is locked (%s)", e.Path, e.Holder())
}

// Holder describes the holder for a message: "pid N (COMMAND)", "pid N",
// or "holder unknown".
func (e *HeldError) Holder() string {
	switch {
	case e.PID > 0 && e.Command != "":
		return fmt.Sprintf("pid %d (%s)", e.PID, e.Command)
	case e.PID > 0:
		return fmt.Sprintf("pid %d", e.PID)
	}
	return "holder unknown"
}

// Unwrap makes errors.Is(err, ErrHeld) hold.
func (e *HeldError) Unwrap() error { return ErrHeld }

// Forever, as Options.Wait, waits until the context is done.
const Forever time.Duration = -1

// maxRecord bounds a holder record, bytes. A longer file at the path is not
// a lock file.
const maxRecord = 4096

// Options says how to take a lock.
type Options struct {
	// Shared takes a shared (reader) lock, which never writes the file (a
	// stale holder record stays for the next exclusive holder to replace);
	// otherwise the lock is exclusive.
	Shared bool
	// Wait is how long Acquire waits for another holder to let go: 0 not at
	// all, Forever until ctx is done.
	Wait time.Duration
	// Retry is how often a waiting Acquire tries again (default 50 ms).
	Retry time.Duration
	// Command is recorded after the process id by an exclusive holder, for
	// whoever the lock turns away (newlines become spaces).
	Command string
	// Waiting, when not nil, is called once, from the calling goroutine,
	// when Acquire starts to wait, with the holder as it stands.
	Waiting func(held *HeldError)
	// RemoveOnRelease removes the lock file on Release (only the file this
	// lock holds, never what was put at the path since); otherwise Release
	// empties it.
	RemoveOnRelease bool

	// afterCheck, when set (by this package's tests), runs between the
	// check of the path and its open: where another process could put
	// something else there.
	afterCheck func(path string)
}

// Lock is a lock Acquire took. Its methods are not safe for concurrent use.
type Lock struct {
	fl     *flock.Flock
	path   string
	remove bool
	// shared: a reader's lock, which never writes the file.
	shared bool
}

// Acquire takes the lock on the file at path, creating the file (not its
// directory) when missing. When another holder has it, Acquire waits as
// opts.Wait says, polling every opts.Retry.
//
// Errors: ErrUnusablePath (wrapped) when something else is at path;
// *HeldError (ErrHeld) when the lock stays held past opts.Wait;
// ErrCannotCreate (wrapped) when the file is missing and cannot be
// created; an error wrapping ctx.Err() when ctx ends first; a wrapped file
// system error otherwise (a directory that does not exist: fs.ErrNotExist).
func Acquire(ctx context.Context, path string, opts Options) (*Lock, error) {
	retry := opts.Retry
	if retry <= 0 {
		retry = 50 * time.Millisecond
	}
	var deadline <-chan time.Time
	if opts.Wait > 0 {
		t := time.NewTimer(opts.Wait)
		defer t.Stop()
		deadline = t.C
	}
	told := false
	for {
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := Check(path); err != nil {
			return nil, err
		}
		if opts.afterCheck != nil {
			opts.afterCheck(path)
		}
		// Opened read-only (flock(2) needs no write access, so a lock file
		// of another user can still be locked), without following a link
		// or waiting on a FIFO put there since the check (refused below,
		// once locked).
		fl := flock.New(path, flock.SetPermissions(0o644),
			flock.SetFlag(os.O_CREATE|os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK))
		try := fl.TryLock
		if opts.Shared {
			try = fl.TryRLock
		}
		ok, err := try()
		if err != nil {
			return nil, openError(path, err)
		}
		if !ok {
			held := heldBy(path)
			if opts.Wait == 0 {
				return nil, held
			}
			if !told && opts.Waiting != nil {
				opts.Waiting(held)
			}
			told = true
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("lock %s: stopped waiting for %s: %w", path, held.Holder(), ctx.Err())
			case <-deadline:
				return nil, heldBy(path)
			case <-time.After(retry):
			}
			continue
		}
		l, again, err := settle(fl, path)
		if err != nil || !again {
			if l != nil {
				l.remove, l.shared = opts.RemoveOnRelease, opts.Shared
				if !opts.Shared {
					// A shared holder writes nothing (a reader leaves the files as it found them);
					// a stale record it finds is replaced by the next exclusive holder.
					l.record(opts.Command)
				}
			}
			return l, err
		}
		// The previous holder removed the file this run locked: lock the
		// one at the path now.
	}
}

// openError describes a failed open or flock of the lock file at path.
func openError(path string, err error) error {
	switch {
	case errors.Is(err, syscall.ELOOP):
		// O_NOFOLLOW: a symbolic link was put there after the check.
		return fmt.Errorf("%w: %s is a symbolic link: remove it", ErrUnusablePath, path)
	case errors.Is(err, fs.ErrPermission) || errors.Is(err, syscall.EROFS):
		if _, serr := os.Lstat(path); errors.Is(serr, fs.ErrNotExist) {
			return fmt.Errorf("%w: %s: %w", ErrCannotCreate, path, err)
		}
	}
	return fmt.Errorf("lock %s: %w", path, err)
}

// settle checks the file fl locked: a regular file, still the one at path.
// again reports that it is not at the path any more (the lock was
// released, lock again).
func settle(fl *flock.Flock, path string) (l *Lock, again bool, err error) {
	held, herr := fl.Stat()
	if herr != nil {
		_ = fl.Unlock()
		return nil, false, fmt.Errorf("lock %s: %w", path, herr)
	}
	if !held.Mode().IsRegular() {
		_ = fl.Unlock()
		return nil, false, fmt.Errorf("%w: %s is %s, not a regular file: remove it", ErrUnusablePath, path, FileKind(held.Mode()))
	}
	cur, cerr := os.Lstat(path)
	if cerr == nil && os.SameFile(held, cur) {
		return &Lock{fl: fl, path: path}, false, nil
	}
	_ = fl.Unlock()
	if cerr != nil && !errors.Is(cerr, fs.ErrNotExist) {
		return nil, false, fmt.Errorf("lock %s: %w", path, cerr)
	}
	return nil, true, nil
}

// Path is the lock file's path.
func (l *Lock) Path() string { return l.path }

// openLocked opens the file this lock holds for writing, without following
// a link or blocking; nil when the path names another file now.
func (l *Lock) openLocked() *os.File {
	f, err := os.OpenFile(l.path, os.O_WRONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	held, herr := l.fl.Stat()
	fi, ferr := f.Stat()
	if herr != nil || ferr != nil || !os.SameFile(held, fi) {
		f.Close()
		return nil
	}
	return f
}

// record writes this process's id and command into the lock file, synced.
// Failing to is not an error (a lock file of another user, read-only): the
// lock is the flock, not the record.
func (l *Lock) record(command string) {
	f := l.openLocked()
	if f == nil {
		return
	}
	defer f.Close()
	line := strconv.Itoa(os.Getpid())
	if command = strings.TrimSpace(strings.ReplaceAll(command, "\n", " ")); command != "" {
		line += " " + command
	}
	line += "\n"
	if len(line) > maxRecord {
		line = line[:maxRecord-1] + "\n"
	}
	if f.Truncate(0) == nil {
		if _, err := f.WriteAt([]byte(line), 0); err == nil {
			_ = f.Sync()
		}
	}
}

// clear empties the lock file, when this process may write it.
func (l *Lock) clear() {
	if f := l.openLocked(); f != nil {
		_ = f.Truncate(0)
		f.Close()
	}
}

// Release lets go of the lock: it removes the lock file first when
// Options.RemoveOnRelease asked for it (only the file this lock holds), or
// empties it, so that nobody is told a finished process holds it. Errors
// are those of the unlock.
func (l *Lock) Release() error {
	if l == nil || l.fl == nil {
		return nil
	}
	removed := false
	if l.remove {
		if held, err := l.fl.Stat(); err == nil {
			if cur, err := os.Lstat(l.path); err == nil && os.SameFile(held, cur) {
				removed = os.Remove(l.path) == nil
			}
		}
	}
	if !removed && !l.shared {
		l.clear()
	}
	err := l.fl.Unlock()
	l.fl = nil
	if err != nil {
		return fmt.Errorf("unlock %s: %w", l.path, err)
	}
	return nil
}

// Check refuses a lock path holding something other than a lock file: a
// symbolic link, a FIFO, device, socket or directory, a hard link, or a
// regular file that is not empty and does not hold a holder record (a
// process id, then optionally a space and a command, on one line). A
// missing path is fine (the lock creates the file). Errors wrap
// ErrUnusablePath, or are those of reading the path.
func Check(path string) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	if !fi.Mode().IsRegular() {
		return fmt.Errorf("%w: %s is %s, not a regular file: remove it", ErrUnusablePath, path, FileKind(fi.Mode()))
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && st.Nlink != 1 {
		return fmt.Errorf("%w: %s is a hard link (%d names): remove it", ErrUnusablePath, path, st.Nlink)
	}
	if fi.Size() == 0 {
		return nil
	}
	if fi.Size() > maxRecord {
		return fmt.Errorf("%w: %s is not a lock file (%d bytes): move it away", ErrUnusablePath, path, fi.Size())
	}
	b, err := safefile.ReadSmall(path, maxRecord)
	if err != nil {
		return fmt.Errorf("lock %s: %w", path, err)
	}
	if _, _, ok := parseRecord(b); !ok && len(b) > 0 {
		shown := strings.TrimSpace(string(b))
		if len(shown) > 40 {
			shown = shown[:40] + "..."
		}
		return fmt.Errorf("%w: %s is not a lock file (it holds %q): move it away", ErrUnusablePath, path, shown)
	}
	return nil
}

// heldBy reads the holder recorded in the lock file at path.
func heldBy(path string) *HeldError {
	h := &HeldError{Path: path}
	if b, err := safefile.ReadSmall(path, maxRecord); err == nil {
		h.PID, h.Command, _ = parseRecord(b)
	}
	return h
}

// parseRecord parses a holder record, "PID[ COMMAND]\n"; ok is false for
// anything else, an empty record included.
func parseRecord(b []byte) (pid int, command string, ok bool) {
	line, rest, _ := strings.Cut(string(b), "\n")
	if rest != "" {
		return 0, "", false
	}
	pidText, command, _ := strings.Cut(line, " ")
	pid, err := strconv.Atoi(pidText)
	if err != nil || pid <= 0 || pidText != strconv.Itoa(pid) {
		return 0, "", false
	}
	return pid, strings.TrimSpace(command), true
}

// FileKind names a file mode's type for a message: "a symbolic link", "a
// directory", "a FIFO", "a device", "a socket", "a regular file", or "a
// file of mode M".
func FileKind(m fs.FileMode) string {
	switch {
	case m&fs.ModeSymlink != 0:
		return "a symbolic link"
	case m.IsDir():
		return "a directory"
	case m&fs.ModeNamedPipe != 0:
		return "a FIFO"
	case m&(fs.ModeDevice|fs.ModeCharDevice) != 0:
		return "a device"
	case m&fs.ModeSocket != 0:
		return "a socket"
	case m.IsRegular():
		return "a regular file"
	}
	return fmt.Sprintf("a file of mode %s", m.Type())
}

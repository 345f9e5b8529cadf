//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package sqlite

import (
	"os"
	"syscall"
)

// fileLock is an advisory lock (flock) on the file beside the database that every Backend
// on the file takes around its writes: SQLite's own lock has no queue (a writer that finds it
// taken sleeps and tries again, up to busy_timeout, and can lose to newcomers every time),
// while a process waiting in flock is woken as soon as the holder lets go. Writers that are
// not txmq Backends still meet at SQLite's lock, with busy_timeout.
type fileLock struct{ f *os.File }

// openFileLock opens (creating) the lock file at path.
func openFileLock(path string) (*fileLock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	return &fileLock{f: f}, nil
}

// lock blocks until the lock is held.
func (l *fileLock) lock() error {
	for {
		err := syscall.Flock(int(l.f.Fd()), syscall.LOCK_EX)
		if err != syscall.EINTR {
			return err
		}
	}
}

// unlock releases it.
func (l *fileLock) unlock() { _ = syscall.Flock(int(l.f.Fd()), syscall.LOCK_UN) }

// close closes the lock file.
func (l *fileLock) close() { _ = l.f.Close() }

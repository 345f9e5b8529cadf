//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package sqlite

// fileLock is a no-op where flock is missing: writers of several processes meet at SQLite's
// own lock only (busy_timeout).
type fileLock struct{}

func openFileLock(string) (*fileLock, error) { return &fileLock{}, nil }
func (*fileLock) lock() error                { return nil }
func (*fileLock) unlock()                    {}
func (*fileLock) close()                     {}

package sqlite

import "sync"

// turns holds the write turn of each database file this process has Backends on, so that the
// Backends of one process on one file queue for the file in one Go channel, whose waiting
// senders are served first come, first served. Only the turn's holder then waits at the lock
// file (fileLock), which meets the other processes: flock wakes its waiters in no set order,
// so Backends of one process meeting there could let one of them take the lock again and again
// while the others' acks and lease extensions waited past QueryTimeout.
var turns = struct {
	mu sync.Mutex
	m  map[string]*writeTurn
}{m: map[string]*writeTurn{}}

// writeTurn is one file's turn and how many open Backends share it.
type writeTurn struct {
	ch   chan struct{} // holds a value while a writer of this process has the turn
	refs int
}

// acquireTurn returns the write turn shared by this process's Backends on file (the database
// file's full name; "" for a database without a file, which gets a turn of its own), to be
// given back by releaseTurn when the Backend closes.
func acquireTurn(file string) chan struct{} {
	if file == "" {
		return make(chan struct{}, 1)
	}
	turns.mu.Lock()
	defer turns.mu.Unlock()
	t := turns.m[file]
	if t == nil {
		t = &writeTurn{ch: make(chan struct{}, 1)}
		turns.m[file] = t
	}
	t.refs++
	return t.ch
}

// releaseTurn gives back a Backend's share of file's write turn.
func releaseTurn(file string) {
	if file == "" {
		return
	}
	turns.mu.Lock()
	defer turns.mu.Unlock()
	if t := turns.m[file]; t != nil {
		if t.refs--; t.refs == 0 {
			delete(turns.m, file)
		}
	}
}

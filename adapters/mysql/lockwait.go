package mysql

import "time"

// lockWaitVar is the server variable that bounds how long a statement waits for a row lock.
const lockWaitVar = "innodb_lock_wait_timeout"

// lockWaitSeconds is the innodb_lock_wait_timeout that Open's connections (and any DSN built
// from a mysql:// URL) set: half of QueryTimeout (DefaultQueryTimeout when zero), in whole
// seconds, at least 1.
//
// Why: when QueryTimeout ends a call, the driver closes the connection, but the server does
// not notice while the statement waits for a lock: with the server's default (50 s) that
// statement's transaction lives on for up to 50 s holding every lock it took, ordering keys
// and rows included, and each call that then waits behind it times out too and leaves a
// transaction of its own behind (under CI load an ordered queue's acks once timed out one
// after another until nothing ran for 20 s). With the server ending lock waits first, a waiting statement fails with a lock
// wait timeout, which is retried at once within QueryTimeout (see retryable), and a
// transaction whose caller gave up is rolled back within seconds.
func lockWaitSeconds(queryTimeout time.Duration) int {
	if queryTimeout <= 0 {
		queryTimeout = DefaultQueryTimeout
	}
	return max(1, int(queryTimeout/2/time.Second))
}

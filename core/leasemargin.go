package core

import "time"

// LeaseMargin returns the fencing margin for a lease: max(lease/10, 1s), at most lease/4 (so a
// 100 ms lease keeps a positive 75 ms before its fence). A node treats a claim as lost once it
// has not confirmed an extension by LeaseUntil - LeaseMargin on its own clock; see the package
// doc ("Leases and self-fencing").
func LeaseMargin(lease time.Duration) time.Duration {
	return min(max(lease/10, time.Second), lease/4)
}

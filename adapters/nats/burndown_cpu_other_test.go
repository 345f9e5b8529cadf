//go:build !unix

package nats

import "time"

// processCPU is 0 where getrusage is missing: no cpu-ns/msg is reported.
func processCPU() time.Duration { return 0 }

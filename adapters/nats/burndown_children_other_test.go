//go:build !linux

package nats

import "time"

// childrenCPU is not measured without Linux's /proc: no server-cpu-ns/msg is reported.
func childrenCPU() (time.Duration, bool) { return 0, false }

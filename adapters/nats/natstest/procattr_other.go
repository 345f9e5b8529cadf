//go:build !linux

package natstest

import "syscall"

// procAttr: only Linux can have a child killed when its parent exits; elsewhere a node
// outlives a test binary that dies without its cleanup.
func procAttr() *syscall.SysProcAttr { return nil }

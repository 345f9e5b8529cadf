package natstest

import "syscall"

// procAttr makes a node's process die with the test binary (SIGKILL when it exits, even by a
// panic or a test timeout), so that no nats-server outlives its test.
func procAttr() *syscall.SysProcAttr { return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} }

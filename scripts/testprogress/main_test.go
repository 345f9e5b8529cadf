package main

import (
	"io"
	"strings"
	"sync"
	"testing"
	"time"
)

// events is go test -json output of three packages: one passing (with a parity summary line),
// one with a failing subtest and one that panicked; and a build failure.
const events = `{"Action":"start","Package":"m/ok"}
{"Action":"run","Package":"m/ok","Test":"TestA"}
{"Action":"output","Package":"m/ok","Test":"TestA","Output":"=== RUN   TestA\n"}
{"Action":"output","Package":"m/ok","Test":"TestA","Output":"parity[mem]: 3 properties ran, 3 passed, 0 failed\n"}
{"Action":"output","Package":"m/ok","Test":"TestA","Output":"    a_test.go:9: noise of a passing test\n"}
{"Action":"pass","Package":"m/ok","Test":"TestA","Elapsed":2.5}
{"Action":"pass","Package":"m/ok","Elapsed":2.6}
{"Action":"start","Package":"m/bad"}
{"Action":"run","Package":"m/bad","Test":"TestB"}
{"Action":"run","Package":"m/bad","Test":"TestB/sub"}
{"Action":"output","Package":"m/bad","Test":"TestB/sub","Output":"    b_test.go:5: the reason it failed\n"}
{"Action":"fail","Package":"m/bad","Test":"TestB/sub","Elapsed":0.1}
{"Action":"fail","Package":"m/bad","Test":"TestB","Elapsed":0.1}
{"Action":"fail","Package":"m/bad","Elapsed":0.2}
{"Action":"start","Package":"m/panics"}
{"Action":"run","Package":"m/panics","Test":"TestP"}
{"Action":"output","Package":"m/panics","Test":"TestP","Output":"panic: assignment to entry in nil map\n"}
{"Action":"output","Package":"m/panics","Output":"FAIL\tm/panics\t0.01s\n"}
{"Action":"fail","Package":"m/panics","Elapsed":0.01}
{"ImportPath":"m/broken [m/broken.test]","Action":"build-output","Output":"broken_test.go:3: undefined: x\n"}
{"ImportPath":"m/broken [m/broken.test]","Action":"build-fail"}
`

func TestProgressLines(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	ok, err := run(strings.NewReader(events), &out, time.Minute)
	if err != nil {
		t.Fatal(err)
	}
	if ok {
		t.Error("run reported success; two packages failed")
	}
	got := out.String()
	for _, want := range []string{
		"parity[mem]: 3 properties ran, 3 passed, 0 failed\n",
		"ok   m/ok\t2.6s\n",
		"--- output of m/bad TestB/sub (failed after 0.1s):\n    b_test.go:5: the reason it failed\n",
		"FAIL m/bad\t0.2s\n",
		"--- output of m/panics TestP (did not finish):\npanic: assignment to entry in nil map\n",
		"FAIL\tm/panics\t0.01s\n",
		"broken_test.go:3: undefined: x\n",
		"1 packages ok, 2 failed; slowest: m/ok TestA 2s\n",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if strings.Contains(got, "noise of a passing test") {
		t.Errorf("output has a passing test's log:\n%s", got)
	}
}

// TestHeartbeat: while a package runs and nothing is printed, a line names it.
func TestHeartbeat(t *testing.T) {
	t.Parallel()
	r, w := io.Pipe()
	var out syncBuilder
	done := make(chan bool, 1)
	go func() {
		ok, _ := run(r, &out, 50*time.Millisecond)
		done <- ok
	}()
	_, _ = io.WriteString(w, `{"Action":"start","Package":"m/slow"}`+"\n"+`{"Action":"run","Package":"m/slow","Test":"TestS"}`+"\n")
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(out.String(), "still running: m/slow") {
		if time.Now().After(deadline) {
			t.Fatalf("no heartbeat line within 10s:\n%s", out.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	_, _ = io.WriteString(w, `{"Action":"pass","Package":"m/slow","Test":"TestS","Elapsed":1}`+"\n"+`{"Action":"pass","Package":"m/slow","Elapsed":1}`+"\n")
	_ = w.Close()
	if !<-done {
		t.Errorf("run reported a failure:\n%s", out.String())
	}
}

// syncBuilder is a strings.Builder safe for the heartbeat's goroutine and the test's.
type syncBuilder struct {
	mu sync.Mutex
	b  strings.Builder
}

func (s *syncBuilder) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuilder) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

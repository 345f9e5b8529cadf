// Command testprogress turns `go test -json` on its standard input into the progress lines
// CI prints (scripts/test runs every go test step through it):
//
//   - one line per package as it finishes: "ok   pkg  12.3s" or "FAIL pkg  12.3s";
//   - the whole output of a failing test as soon as it fails (and, when a package fails, the
//     output of its tests that never finished, as after a panic or a timeout, and the
//     package's own output), so a failure reads as plainly as in go test's own output;
//   - the figure lines the suites print ("parity[...]", "chaos[...]") as they come;
//   - build errors as they come;
//   - while packages run and nothing else was printed for a minute, a line naming them and
//     how long they have run, so CI never goes silent for minutes;
//   - at the end, one line with the package counts and the slowest top-level tests.
//
// It exits with status 1 when a package failed, 0 otherwise; the
// calling script still checks go test's own exit status.
//
// Usage:
//
//	go test -json ./... | go run ./scripts/testprogress
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// event is one line of `go test -json` (cmd/test2json's TestEvent, plus the build events).
type event struct {
	Time       time.Time
	Action     string
	Package    string
	ImportPath string
	Test       string
	Elapsed    float64
	Output     string
}

// quiet is how long the output may stay silent while packages run before a heartbeat line.
const quiet = 60 * time.Second

// pkgState is what is known of one package under test.
type pkgState struct {
	start   time.Time
	outputs map[string][]string // test name ("" for the package) -> output lines, until it passes
	running map[string]bool     // tests started and not finished
	passed  int                 // tests passed so far
}

type progress struct {
	mu       sync.Mutex
	out      io.Writer
	quiet    time.Duration // silence before a heartbeat line (the const quiet in CI)
	last     time.Time     // when a line was last printed
	pkgs     map[string]*pkgState
	ok, fail int
	slowest  []timed
}

type timed struct {
	name    string
	elapsed float64
}

func main() {
	ok, err := run(os.Stdin, os.Stdout, quiet)
	if err != nil {
		fmt.Fprintf(os.Stderr, "testprogress: reading go test -json: %v\n", err)
		os.Exit(1)
	}
	if !ok {
		os.Exit(1)
	}
}

// run reads go test -json from in and prints the progress lines on out, with a heartbeat
// after silent periods of quietFor. It reports whether every package passed.
func run(in io.Reader, out io.Writer, quietFor time.Duration) (bool, error) {
	p := &progress{out: out, quiet: quietFor, last: time.Now(), pkgs: map[string]*pkgState{}}
	stop := make(chan struct{})
	beat := make(chan struct{})
	go func() { defer close(beat); p.heartbeat(stop) }()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 64<<20)
	for sc.Scan() {
		p.line(sc.Bytes())
	}
	close(stop)
	<-beat
	if err := sc.Err(); err != nil {
		return false, err
	}
	return p.summary(), nil
}

// printf prints one line and notes when. The caller holds p.mu.
func (p *progress) printf(format string, args ...any) {
	fmt.Fprintf(p.out, format, args...)
	p.last = time.Now()
}

func (p *progress) line(b []byte) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var e event
	if len(b) == 0 || b[0] != '{' || json.Unmarshal(b, &e) != nil {
		p.printf("%s\n", b) // not an event: a line of go's own, passed on as it is
		return
	}
	switch e.Action {
	case "build-output":
		p.printf("%s", e.Output)
		return
	case "build-fail":
		return
	}
	s := p.pkgs[e.Package]
	if s == nil {
		s = &pkgState{start: time.Now(), outputs: map[string][]string{}, running: map[string]bool{}}
		p.pkgs[e.Package] = s
	}
	switch e.Action {
	case "start":
		s.start = time.Now()
	case "run":
		s.running[e.Test] = true
	case "output":
		s.outputs[e.Test] = append(s.outputs[e.Test], e.Output)
		if strings.HasPrefix(e.Output, "parity[") || strings.HasPrefix(e.Output, "chaos[") {
			p.printf("%s", e.Output)
		}
	case "pass", "skip":
		if e.Test == "" {
			p.finish(e, s, true)
			return
		}
		delete(s.running, e.Test)
		delete(s.outputs, e.Test)
		if e.Action == "pass" {
			s.passed++
			p.noteSlow(e)
		}
	case "fail":
		if e.Test == "" {
			p.finish(e, s, false)
			return
		}
		delete(s.running, e.Test)
		p.noteSlow(e)
		if len(s.outputs[e.Test]) > 0 {
			p.printf("--- output of %s %s (failed after %.1fs):\n", e.Package, e.Test, e.Elapsed)
			for _, o := range s.outputs[e.Test] {
				p.printf("%s", o)
			}
		}
		delete(s.outputs, e.Test)
	}
}

// noteSlow keeps the slowest top-level tests for the summary.
func (p *progress) noteSlow(e event) {
	if strings.Contains(e.Test, "/") || e.Elapsed < 1 {
		return
	}
	p.slowest = append(p.slowest, timed{short(e.Package) + " " + e.Test, e.Elapsed})
	sort.Slice(p.slowest, func(i, j int) bool { return p.slowest[i].elapsed > p.slowest[j].elapsed })
	if len(p.slowest) > 5 {
		p.slowest = p.slowest[:5]
	}
}

// finish prints a package's result line (and, when it failed, what is left of its output).
func (p *progress) finish(e event, s *pkgState, ok bool) {
	delete(p.pkgs, e.Package)
	if ok {
		if e.Action == "skip" { // no test files
			return
		}
		p.ok++
		p.printf("ok   %s\t%.1fs\n", e.Package, e.Elapsed)
		return
	}
	p.fail++
	var unfinished []string
	for t := range s.running {
		unfinished = append(unfinished, t)
	}
	sort.Strings(unfinished)
	for _, t := range unfinished {
		if len(s.outputs[t]) == 0 {
			continue
		}
		p.printf("--- output of %s %s (did not finish):\n", e.Package, t)
		for _, o := range s.outputs[t] {
			p.printf("%s", o)
		}
	}
	for _, o := range s.outputs[""] {
		p.printf("%s", o)
	}
	p.printf("FAIL %s\t%.1fs\n", e.Package, e.Elapsed)
}

// heartbeat prints the packages still running when nothing was printed for a while.
func (p *progress) heartbeat(stop <-chan struct{}) {
	t := time.NewTicker(max(p.quiet/12, 10*time.Millisecond))
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		p.mu.Lock()
		if time.Since(p.last) >= p.quiet && len(p.pkgs) > 0 {
			names := make([]string, 0, len(p.pkgs))
			for name := range p.pkgs {
				names = append(names, name)
			}
			sort.Strings(names)
			parts := make([]string, len(names))
			for i, name := range names {
				s := p.pkgs[name]
				parts[i] = fmt.Sprintf("%s (%s, %d tests passed, %d running)", short(name),
					time.Since(s.start).Round(time.Second), s.passed, len(s.running))
			}
			p.printf("...  still running: %s\n", strings.Join(parts, ", "))
		}
		p.mu.Unlock()
	}
}

// summary prints the closing line and reports whether every package passed.
func (p *progress) summary() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	for name, s := range p.pkgs { // the input ended before these finished (go test was killed)
		if len(s.running) > 0 || len(s.outputs) > 0 {
			p.finish(event{Package: name, Action: "fail", Elapsed: time.Since(s.start).Seconds()}, s, false)
		}
	}
	line := fmt.Sprintf("%d packages ok, %d failed", p.ok, p.fail)
	if len(p.slowest) > 0 {
		parts := make([]string, len(p.slowest))
		for i, t := range p.slowest {
			parts[i] = fmt.Sprintf("%s %.0fs", t.name, t.elapsed)
		}
		line += "; slowest: " + strings.Join(parts, ", ")
	}
	p.printf("%s\n", line)
	return p.fail == 0
}

// short drops the module path from a package path.
func short(pkg string) string {
	if i := strings.Index(pkg, "/txmq/txmq/"); i >= 0 {
		return pkg[i+len("/txmq/txmq/"):]
	}
	if strings.HasSuffix(pkg, "/txmq/txmq") {
		return "txmq"
	}
	return pkg
}

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
)

// fault is one fault window of a scenario: from start (the fault began) to end (the system
// could work again: the backend answers, the proxy forwards, the killed worker was killed).
// killed names the worker incarnations the fault killed.
type fault struct {
	start, end time.Time
	killed     []string
}

// figures are one scenario's results.
type figures struct {
	committed, delivered, missing, phantom, duplicates, overlaps int
	// recover is the longest time, over the faults, from a fault's end until a message
	// committed after it was delivered, every message committed during it was delivered, and
	// every run a kill interrupted was delivered again; -1 when that never happened. Messages
	// of the Exclusive queue do not count for the first two: they wait, by design, behind the
	// long Exclusive run a backend fault is given (see slowMarker).
	recover time.Duration
	// missingKeys lists a few missing keys, for the failure message.
	missingKeys []string
	// interrupted counts the runs a killed process never finished.
	interrupted int
	// overlapping describes the first few overlapping Exclusive runs, for the report.
	overlapping []string
}

// runRec is one listener run read from the delivery logs.
type runRec struct {
	queue      string
	keys       []string
	start, end time.Time // end is zero when the log has no end (the process died in the run)
	ok         bool
	inc        string // the worker incarnation (log file name without .jsonl)
}

// commit is one committed message of the ground truth.
type commit struct {
	at    time.Time // when the publisher committed it (or its immediate publish was accepted)
	queue string
}

// committedRows reads the ground truth: every committed key with its commit time and queue.
func committedRows(ctx context.Context, pool *pgxpool.Pool, schema string) (map[string]commit, error) {
	rows, err := pool.Query(ctx, "SELECT k, q, at FROM "+pgx.Identifier{schema}.Sanitize()+".chaos_committed")
	if err != nil {
		return nil, err
	}
	out := map[string]commit{}
	var k, q string
	var at time.Time
	_, err = pgx.ForEachRow(rows, []any{&k, &q, &at}, func() error {
		out[k] = commit{at, q}
		return nil
	})
	return out, err
}

// readRuns reads every worker's delivery log in dir.
func readRuns(dir string) ([]*runRec, error) {
	files, err := filepath.Glob(filepath.Join(dir, "*.jsonl"))
	if err != nil {
		return nil, err
	}
	var runs []*runRec
	for _, f := range files {
		inc := strings.TrimSuffix(filepath.Base(f), ".jsonl")
		byID := map[string]*runRec{}
		fh, err := os.Open(f)
		if err != nil {
			return nil, err
		}
		sc := bufio.NewScanner(fh)
		sc.Buffer(make([]byte, 1<<20), 1<<24)
		for sc.Scan() {
			var e event
			if json.Unmarshal(sc.Bytes(), &e) != nil {
				continue // a torn last line of a killed process
			}
			switch e.Ev {
			case "s":
				r := &runRec{queue: e.Queue, keys: e.Keys, start: time.Unix(0, e.T), inc: inc}
				byID[e.Run] = r
				runs = append(runs, r)
			case "e":
				if r := byID[e.Run]; r != nil {
					r.end, r.ok = time.Unix(0, e.T), e.OK
				}
			}
		}
		err = sc.Err()
		fh.Close()
		if err != nil {
			return nil, err
		}
	}
	return runs, nil
}

// compute derives a scenario's figures. exited gives each worker incarnation's exit (or kill)
// time, the end of a run its log does not end.
func compute(committed map[string]commit, runs []*runRec, faults []fault, exclusive string, exited map[string]time.Time) figures {
	var f figures
	f.committed = len(committed)
	firstOK := map[string][]time.Time{} // key -> end times of its successful runs
	deliveries := 0
	for _, r := range runs {
		if !r.ok {
			continue
		}
		for _, k := range r.keys {
			firstOK[k] = append(firstOK[k], r.end)
			deliveries++
		}
	}
	f.delivered = len(firstOK)
	f.duplicates = deliveries - len(firstOK)
	for k := range firstOK {
		if _, ok := committed[k]; !ok {
			f.phantom++
		}
	}
	for k := range committed {
		if _, ok := firstOK[k]; !ok {
			f.missing++
			if len(f.missingKeys) < 5 {
				f.missingKeys = append(f.missingKeys, k)
			}
		}
	}

	// Exclusive overlaps: runs of the Exclusive queue sorted by start; a run that starts
	// before an earlier run ended overlaps it.
	type span struct {
		start, end time.Time
		r          *runRec
	}
	var spans []span
	for _, r := range runs {
		if r.queue != exclusive {
			continue
		}
		end := r.end
		if end.IsZero() {
			end = exited[r.inc]
			if end.IsZero() {
				end = time.Now() // still running: the process never ended
			}
		}
		spans = append(spans, span{r.start, end, r})
	}
	sort.Slice(spans, func(i, j int) bool { return spans[i].start.Before(spans[j].start) })
	var longest span // the run ending last so far
	for _, s := range spans {
		if s.start.Before(longest.end) {
			f.overlaps++
			if len(f.overlapping) < 5 {
				f.overlapping = append(f.overlapping, fmt.Sprintf("%s %v (%s..%s, ok %v) overlaps %s %v (%s..%s, ok %v)",
					s.r.inc, s.r.keys, s.start.Format("15:04:05.000"), s.end.Format("15:04:05.000"), s.r.ok,
					longest.r.inc, longest.r.keys, longest.start.Format("15:04:05.000"), longest.end.Format("15:04:05.000"), longest.r.ok))
			}
		}
		if s.end.After(longest.end) {
			longest = s
		}
	}

	// Time to recover.
	firstAfter := func(k string, t time.Time) (time.Time, bool) {
		var best time.Time
		for _, e := range firstOK[k] {
			if !e.Before(t) && (best.IsZero() || e.Before(best)) {
				best = e
			}
		}
		return best, !best.IsZero()
	}
	for _, fl := range faults {
		// A message committed after the fault's end, delivered.
		var resumed time.Time
		for k, c := range committed {
			if c.queue == exclusive || !c.at.After(fl.end) {
				continue
			}
			if e, ok := firstAfter(k, fl.end); ok && (resumed.IsZero() || e.Before(resumed)) {
				resumed = e
			}
		}
		if resumed.IsZero() {
			f.recover = -1
			return f
		}
		rec := resumed.Sub(fl.end)
		// Every message committed during the fault, delivered.
		for k, c := range committed {
			if c.queue == exclusive || c.at.Before(fl.start) || c.at.After(fl.end) {
				continue
			}
			e, ok := firstAfter(k, c.at)
			if !ok {
				f.recover = -1
				return f
			}
			rec = max(rec, e.Sub(fl.end))
		}
		// Every batch a killed worker was running, delivered again.
		killed := map[string]bool{}
		for _, inc := range fl.killed {
			killed[inc] = true
		}
		for _, r := range runs {
			if !killed[r.inc] || !r.end.IsZero() {
				continue
			}
			f.interrupted++
			for _, k := range r.keys {
				e, ok := firstAfter(k, fl.end)
				if !ok {
					f.recover = -1
					return f
				}
				rec = max(rec, e.Sub(fl.end))
			}
		}
		f.recover = max(f.recover, rec)
	}
	return f
}

// line is the scenario's figure line.
func (f figures) line(name string) string {
	rec := "never"
	if f.recover >= 0 {
		rec = fmt.Sprintf("%.1fs", f.recover.Seconds())
	}
	return fmt.Sprintf("chaos[%s]: committed %d, delivered %d, missing %d, phantom %d, duplicates %d, exclusive overlaps %d, recover %s",
		name, f.committed, f.delivered, f.missing, f.phantom, f.duplicates, f.overlaps, rec)
}

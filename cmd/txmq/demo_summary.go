package main

import (
	"errors"
	"fmt"
	"sort"
	"strings"
	"text/tabwriter"
	"time"
)

// demoQueues are the demo's queues in the order the summary lists them, with their settings.
var demoQueues = []struct{ name, settings string }{
	{"signups", "Try, MaxConcurrentBatches 4"},
	{"orders", "Require"},
	{"emails", "Try"},
	{"audit", "Never"},
	{"invoices", "Never, 3 runs"},
	{"reports", "Never, Exclusive"},
	{"reminders", "Never, delayed"},
}

// summary prints the table and checks every count: a wrong one is an error.
func (d *demo) summary(took time.Duration) error {
	st := d.node.Stats()
	d.printf("\nsummary (%v)\n", took.Round(10*time.Millisecond))
	tw := tabwriter.NewWriter(d.out, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "  QUEUE\tSETTINGS\tPUBLISHED\tDELIVERED\tFAILED RUNS\tDEAD LETTERS\tREPLAYED")
	var problems []string
	for _, q := range demoQueues {
		failed, replayed := int64(0), 0
		if q.name == "invoices" {
			failed, replayed = d.failed.Load(), d.replayed
		}
		pub, got, dead := d.published[q.name], d.delivered[q.name].Load(), d.sink.queue(q.name)
		fmt.Fprintf(tw, "  %s\t%s\t%d\t%d\t%d\t%d\t%d\n", q.name, q.settings, pub, got, failed, dead, replayed)
		if got != pub {
			problems = append(problems, fmt.Sprintf("queue %s: published %d, delivered %d", q.name, pub, got))
		}
	}
	if err := tw.Flush(); err != nil {
		return err
	}
	d.printf("  dropped batches: %s; OnError calls: %d; max in flight on reports: %d\n", dropped(st.Dropped), d.onError.Load(), d.maxFlight.Load())
	for _, c := range []struct {
		what      string
		got, want int64
	}{
		{"dead letters", int64(d.sink.count()), 1},
		{"failed runs of invoices", d.failed.Load(), 3},
		{"OnError calls", d.onError.Load(), 1},
		{"delivery_exhausted drops", st.Dropped["delivery_exhausted"], 1},
		{"max in flight on the Exclusive queue", d.maxFlight.Load(), 1},
	} {
		if c.got != c.want {
			problems = append(problems, fmt.Sprintf("%s: %d, want %d", c.what, c.got, c.want))
		}
	}
	if len(problems) > 0 {
		return errors.New("unexpected counts (a bug: please report it): " + strings.Join(problems, "; "))
	}
	return nil
}

func sortStrings(s []string) { sort.Strings(s) }

package ledger

import (
	"context"
	"slices"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestCancelScope: a cancel applies to the batch it found and to the batches created no later
// than it, never to a later publish of the id, whether that publish is stored directly (a
// batch) or staged in a transaction (no batch until a node runs it); and the id reads as its
// later message's state, also after a node left the cancelled message out of its old batch.
// Both answers of CancelledMessages (the cache, the per-batch query) agree, for caller ids
// (a row each) and ids made by core.NewID.
func TestCancelScope(t *testing.T) {
	t.Parallel()
	for _, kind := range []struct {
		name string
		id   func() string
	}{{"caller id", func() string { return "order-" + core.NewID() }}, {"NewID id", core.NewID}} {
		for _, staged := range []bool{false, true} {
			name := kind.name + ", published again directly"
			if staged {
				name = kind.name + ", published again in a transaction"
			}
			t.Run(name, func(t *testing.T) {
				t.Parallel()
				testCancelScope(t, kind.id(), staged)
			})
		}
	}
}

func testCancelScope(t *testing.T, id string, staged bool) {
	l, _ := newTestLedger(t, &Options{NoPrune: true, CancelCheck: 50 * time.Millisecond})
	ctx := context.Background()
	flush := func() {
		t.Helper()
		if err := l.Flush(ctx); err != nil {
			t.Fatal(err)
		}
	}
	get := func(want core.MessageState) core.MessageInfo {
		t.Helper()
		m, err := l.GetMessage(ctx, id)
		if err != nil || m.State != want {
			t.Fatalf("GetMessage = %+v, %v; want %s", m, err, want)
		}
		return m
	}
	// check asks both answers which of id's batches are cancelled.
	check := func(b core.CancelCheck, want bool) {
		t.Helper()
		b.Queue, b.IDs = "q", []string{id, "other-" + id}
		if got, err := l.queryCancelled(ctx, b); err != nil || got[id] != want || len(got) > 1 {
			t.Errorf("queryCancelled(batch %q, created %v) = %v, %v; want %s cancelled: %v", b.BatchID, b.Created, got, err, id, want)
		}
		var got map[string]bool
		for range 3 { // the cache, once its reader read (it starts on the first call)
			var err error
			if got, err = l.CancelledMessages(ctx, b); err != nil {
				t.Fatal(err)
			}
			if got[id] == want {
				break
			}
			time.Sleep(60 * time.Millisecond)
		}
		if got[id] != want || len(got) > 1 {
			t.Errorf("CancelledMessages(batch %q, created %v) = %v; want %s cancelled: %v", b.BatchID, b.Created, got, id, want)
		}
	}

	created := time.Now().Add(-time.Minute)
	l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "old", IDs: []string{id}, State: core.StateDelayed, PublishedAt: created, UpdatedAt: created, Due: time.Now().Add(time.Hour)})
	if m, err := l.CancelMessage(ctx, id); err != nil || m.State != core.StateCancelled {
		t.Fatalf("CancelMessage = %+v, %v", m, err)
	}
	check(core.CancelCheck{BatchID: "old", Created: created}, true)
	check(core.CancelCheck{BatchID: "copy", Created: created}, true) // a copy of it under another id
	after := time.Now()
	check(core.CancelCheck{BatchID: "old", Created: after}, true) // the batch the cancel found, whatever its time

	// Published again, and run.
	if staged {
		l.RecordBatch(core.BatchEvent{Queue: "q", IDs: []string{id}, State: core.StateQueued, PublishedAt: after, UpdatedAt: after})
		flush()
		if m := get(core.StateQueued); !m.PublishedAt.Equal(after.Truncate(time.Microsecond)) || m.BatchID != "" {
			t.Errorf("the staged later publish reads %+v; want its own publish time %v and no batch yet", m, after)
		}
	} else {
		l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "new", IDs: []string{id}, State: core.StateQueued, PublishedAt: after, UpdatedAt: after})
		flush()
		if m := get(core.StateQueued); m.BatchID != "new" || !m.PublishedAt.Equal(after.Truncate(time.Microsecond)) {
			t.Errorf("the later publish reads %+v; want batch new, published %v", m, after)
		}
	}
	created2 := time.Now()
	check(core.CancelCheck{BatchID: "new", Created: created2}, false)
	check(core.CancelCheck{BatchID: "old", Created: created}, true)
	start := time.Now()
	l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "new", IDs: []string{id}, State: core.StateRunning, UpdatedAt: start, Node: "n1", Runs: 1, Due: start.Add(time.Hour)})
	flush()
	get(core.StateRunning)
	// The old batch comes due: a node leaves the message out of it.
	l.RecordBatch(core.BatchEvent{Queue: "q", IDs: []string{id}, State: core.StateCancelled, UpdatedAt: time.Now(), Node: "n2"})
	flush()
	get(core.StateRunning)
	l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "new", IDs: []string{id}, State: core.StateCompleted, UpdatedAt: time.Now(), Node: "n1", Runs: 1})
	flush()
	if m := get(core.StateCompleted); m.BatchID != "new" {
		t.Errorf("completed: %+v; want batch new", m)
	}
	ms, err := l.ListMessages(ctx, core.MessageFilter{Queue: "q"})
	if err != nil || len(ms) != 1 || ms[0].ID != id || ms[0].State != core.StateCompleted {
		t.Errorf("ListMessages = %+v, %v; want %s completed, once", ms, err, id)
	}
	check(core.CancelCheck{BatchID: "old", Created: created}, true)

	// Cancelled again (a completed message cannot be: publish a third time), the new cancel
	// covers the third message and, by time, the first.
	third := time.Now()
	l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "third", IDs: []string{id}, State: core.StateDelayed, PublishedAt: third, UpdatedAt: third, Due: third.Add(time.Hour)})
	flush()
	get(core.StateDelayed)
	if m, err := l.CancelMessage(ctx, id); err != nil || m.State != core.StateCancelled {
		t.Fatalf("second CancelMessage = %+v, %v", m, err)
	}
	check(core.CancelCheck{BatchID: "third", Created: third}, true)
	check(core.CancelCheck{BatchID: "old", Created: created}, true)
	check(core.CancelCheck{BatchID: "fourth", Created: time.Now()}, false)
}

// TestRunningLeaseEnds: a running event carries the end of the run's lease; once it passed
// (the node died or lost the lease), lookups and listings read the message queued since the
// lease's end, and an extension's event (as old as the run's start) moves the end; a running
// state without a lease end (an older build's) stays running.
func TestRunningLeaseEnds(t *testing.T) {
	t.Parallel()
	l, _ := newTestLedger(t, &Options{NoPrune: true})
	ctx := context.Background()
	start := time.Now().Add(-time.Minute)
	leaseEnd := start.Add(30 * time.Second)
	ids := []string{core.NewID(), "caller-" + core.NewID()}
	legacy := core.NewID()
	l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "b", IDs: ids, State: core.StateQueued, PublishedAt: start, UpdatedAt: start})
	l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "b", IDs: ids, State: core.StateRunning, UpdatedAt: start, Node: "dead", Runs: 1, Due: leaseEnd})
	l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "c", IDs: []string{legacy}, State: core.StateRunning, UpdatedAt: start, Node: "old", Runs: 1})
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	listed := func(state core.MessageState) []string {
		t.Helper()
		ms, err := l.ListMessages(ctx, core.MessageFilter{Queue: "q", State: state})
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, m := range ms {
			out = append(out, m.ID)
		}
		slices.Sort(out)
		return out
	}
	for _, id := range ids {
		m, err := l.GetMessage(ctx, id)
		if err != nil || m.State != core.StateQueued || !m.UpdatedAt.Equal(leaseEnd.Truncate(time.Microsecond)) || !m.Due.IsZero() || m.Node != "dead" || m.Runs != 1 {
			t.Errorf("GetMessage(%s) past its run's lease = %+v, %v; want queued since the lease's end %v, node dead, runs 1", id, m, err, leaseEnd)
		}
	}
	want := slices.Sorted(slices.Values(ids))
	if got := listed(core.StateQueued); !slices.Equal(got, want) {
		t.Errorf("ListMessages(queued) = %q; want %q", got, want)
	}
	if got := listed(core.StateRunning); !slices.Equal(got, []string{legacy}) {
		t.Errorf("ListMessages(running) = %q; want only %s (recorded without a lease end)", got, legacy)
	}

	// An extension: the event of the run's start with a later lease end.
	l.RecordBatch(core.BatchEvent{Queue: "q", BatchID: "b", IDs: ids, State: core.StateRunning, UpdatedAt: start, Node: "dead", Runs: 1, Due: time.Now().Add(time.Minute)})
	if err := l.Flush(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range ids {
		m, err := l.GetMessage(ctx, id)
		if err != nil || m.State != core.StateRunning || !m.UpdatedAt.Equal(start.Truncate(time.Microsecond)) || !m.Due.IsZero() {
			t.Errorf("GetMessage(%s) within its extended lease = %+v, %v; want running since the run's start, no due time", id, m, err)
		}
	}
	if got := listed(core.StateRunning); len(got) != 3 {
		t.Errorf("ListMessages(running) = %q; want the batch's two and %s", got, legacy)
	}
}

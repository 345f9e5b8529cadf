package record

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// events is a core.MessageRecorder that keeps what it is told.
type events struct{ got []core.BatchEvent }

func (e *events) RecordBatch(ev core.BatchEvent) { e.got = append(e.got, ev) }
func (e *events) CancelledMessages(context.Context, core.CancelCheck) (map[string]bool, error) {
	return nil, nil
}

// TestEvents: each thing the engine tells the recorder becomes the ledger event it means; a
// delay makes a stored or committed message delayed (the outbox keeps its own state), and no
// ids record nothing.
func TestEvents(t *testing.T) {
	t.Parallel()
	at := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	ids := []string{"a", "b"}
	for _, tc := range []struct {
		name  string
		tell  func(r *Ledger)
		want  core.MessageState
		due   time.Time
		batch string
		none  bool
	}{
		{"stored now", func(r *Ledger) {
			r.Stored(core.OutgoingBatch{Queue: "q", ID: "b1", MessageIDs: ids}, core.StateQueued, at)
		}, core.StateQueued, time.Time{}, "b1", false},
		{"stored delayed", func(r *Ledger) {
			r.Stored(core.OutgoingBatch{Queue: "q", ID: "b1", MessageIDs: ids, Delay: time.Minute}, core.StateQueued, at)
		}, core.StateDelayed, at.Add(time.Minute), "b1", false},
		{"handed to the outbox, delayed", func(r *Ledger) {
			r.Stored(core.OutgoingBatch{Queue: "q", ID: "b1", MessageIDs: ids, Delay: time.Minute}, core.StateOutbox, at)
		}, core.StateOutbox, at.Add(time.Minute), "b1", false},
		{"stored without ids", func(r *Ledger) { r.Stored(core.OutgoingBatch{Queue: "q", ID: "b1"}, core.StateQueued, at) }, "", time.Time{}, "", true},
		{"committed now", func(r *Ledger) { r.Committed("q", ids, time.Time{}, at) }, core.StateQueued, time.Time{}, "", false},
		{"committed for later", func(r *Ledger) { r.Committed("q", ids, at.Add(time.Hour), at) }, core.StateDelayed, at.Add(time.Hour), "", false},
		{"running", func(r *Ledger) { r.Running("q", "b1", ids, 2, at, at.Add(30*time.Second)) }, core.StateRunning, at.Add(30 * time.Second), "b1", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ev := &events{}
			r := New(ev)
			r.node = "n1"
			tc.tell(r)
			if tc.none {
				if len(ev.got) != 0 {
					t.Fatalf("recorded %+v; want nothing", ev.got)
				}
				return
			}
			if len(ev.got) != 1 {
				t.Fatalf("recorded %d events; want 1", len(ev.got))
			}
			g := ev.got[0]
			if g.State != tc.want || !g.Due.Equal(tc.due) || g.Queue != "q" || g.BatchID != tc.batch || len(g.IDs) != 2 || g.UpdatedAt.IsZero() {
				t.Fatalf("recorded %+v; want state %s, due %v, queue q, batch %q, 2 ids, a time", g, tc.want, tc.due, tc.batch)
			}
			if g.State == core.StateRunning && (g.Node != "n1" || g.Runs != 2 || !g.UpdatedAt.Equal(at)) {
				t.Fatalf("running event %+v; want node n1, run 2, as old as the run's start", g)
			}
		})
	}
}

// TestNewWithoutLedger: no ledger, no feature (a nil *Ledger would be plugged as a Recorder).
func TestNewWithoutLedger(t *testing.T) {
	t.Parallel()
	if r := New(nil); r != nil {
		t.Fatalf("New(nil) = %v; want nil", r)
	}
}

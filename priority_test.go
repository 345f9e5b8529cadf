package txmq

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/envelope"
)

// prioFake is a backend that honours priorities (core.Prioritizes).
type prioFake struct{ *fakeBackend }

func (prioFake) Prioritizes() error { return nil }

// TestPriorityConfigErrors: the priority settings are checked at declaration, each error
// naming the queue and the setting.
func TestPriorityConfigErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name string
		cfg  QueueConfig[int]
		bad  string // a word of the error; "" for none
	}{
		{"prioritized", QueueConfig[int]{Prioritized: true}, ""},
		{"all set", QueueConfig[int]{Prioritized: true, PriorityAging: time.Millisecond, DefaultPriority: MaxPriority}, ""},
		{"aging without prioritized", QueueConfig[int]{PriorityAging: time.Second}, "without Prioritized"},
		{"default without prioritized", QueueConfig[int]{DefaultPriority: 3}, "without Prioritized"},
		{"negative aging", QueueConfig[int]{Prioritized: true, PriorityAging: -time.Second}, "PriorityAging"},
		{"sub-millisecond aging", QueueConfig[int]{Prioritized: true, PriorityAging: time.Microsecond}, "PriorityAging"},
		{"huge aging", QueueConfig[int]{Prioritized: true, PriorityAging: 25 * time.Hour}, "PriorityAging"},
		{"default too high", QueueConfig[int]{Prioritized: true, DefaultPriority: MaxPriority + 1}, "DefaultPriority"},
		{"default negative", QueueConfig[int]{Prioritized: true, DefaultPriority: -1}, "DefaultPriority"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			tt.cfg.Transactional = Try
			_, err := DeclareIn(NewRegistry(), "prio-q", tt.cfg)
			switch {
			case tt.bad == "" && err != nil:
				t.Fatalf("DeclareIn: %v", err)
			case tt.bad != "" && (!errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "prio-q") || !strings.Contains(err.Error(), tt.bad)):
				t.Fatalf("DeclareIn: %v; want ErrInvalidConfig naming the queue and %q", err, tt.bad)
			}
		})
	}
}

// TestPriorityPublish: a publish's priority (its option, else the queue's DefaultPriority)
// reaches the batch and its envelope with the lead priority*PriorityAging; publishes of
// different priorities never share a batch; bad priorities are errors naming the queue.
func TestPriorityPublish(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	fb := &fakeBackend{}
	n := newTestNodeOn(t, prioFake{fb}, &NodeOptions{Registry: reg})
	q := MustDeclareIn(reg, "prio", QueueConfig[int]{Transactional: Try, Prioritized: true, PriorityAging: 2 * time.Second, DefaultPriority: 1})
	plain := MustDeclareIn(reg, "plain", QueueConfig[int]{Transactional: Try})
	ctx := context.Background()
	for _, tt := range []struct {
		name string
		q    *Queue[int]
		p    int
	}{{"too high", q, MaxPriority + 1}, {"negative", q, -1}, {"on plain", plain, 1}} {
		if err := tt.q.Publish(ctx, n, 1, Priority(tt.p)); !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.q.Name()) {
			t.Errorf("%s: %v; want ErrInvalidConfig naming queue %q", tt.name, err, tt.q.Name())
		}
	}
	for _, p := range []PublishOption{Priority(7), nil, Priority(0), Priority(7)} {
		var opts []PublishOption
		if p != nil {
			opts = append(opts, p)
		}
		if err := q.Publish(ctx, n, 1, opts...); err != nil {
			t.Fatalf("Publish: %v", err)
		}
	}
	if err := plain.Publish(ctx, n, 1); err != nil {
		t.Fatalf("Publish: %v", err)
	}
	if err := n.Close(ctx); err != nil { // flushes the buffer
		t.Fatalf("Close: %v", err)
	}
	var got []string
	for _, b := range fb.Batches() {
		p, lead := envelope.PriorityOf(b.Body)
		if p != b.Priority || lead != b.Lead {
			t.Errorf("batch of queue %s: envelope says priority %d lead %v, batch %d %v", b.Queue, p, lead, b.Priority, b.Lead)
		}
		if b.Lead != time.Duration(b.Priority)*2*time.Second && b.Queue == "prio" {
			t.Errorf("batch with priority %d has lead %v; want priority*2s", b.Priority, b.Lead)
		}
		got = append(got, b.Queue+":"+strings.Repeat("m", b.Messages)+":"+string(rune('0'+b.Priority)))
	}
	sort.Strings(got)
	want := []string{"plain:m:0", "prio:m:0", "prio:m:1", "prio:mm:7"}
	if strings.Join(got, ",") != strings.Join(want, ",") {
		t.Fatalf("batches %v; want %v (one batch per priority)", got, want)
	}
}

// TestPrioritizedRefused: a node on a backend without priorities refuses a Prioritized queue
// with an error naming the queue.
func TestPrioritizedRefused(t *testing.T) {
	t.Parallel()
	reg := NewRegistry()
	MustDeclareIn(reg, "prio", QueueConfig[int]{Transactional: Try, Prioritized: true})
	_, err := NewNode(&fakeBackend{}, &NodeOptions{Registry: reg, Logger: quietLogger()})
	if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), `"prio"`) || !strings.Contains(err.Error(), "Prioritizer") {
		t.Fatalf("NewNode: %v; want ErrInvalidConfig naming the queue and core.Prioritizer", err)
	}
}

// TestPriorityInspector: the Inspector shows a stored message's priority (the backend's
// native lookup reads it from the batch).
func TestPriorityInspector(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	reg := NewRegistry()
	q := MustDeclareIn(reg, "prio-inspect", QueueConfig[int]{Transactional: Try, Prioritized: true})
	app, err := Open(ctx, &Config{Backend: "memory://", Node: NodeOptions{Registry: reg, Logger: quietLogger()}})
	if err != nil {
		t.Fatal(err)
	}
	defer app.Close(ctx)
	if err := q.Publish(ctx, app.Node, 1, ID("m-1"), Priority(6)); err != nil {
		t.Fatal(err)
	}
	var m MessageInfo
	for {
		if m, err = app.Inspector().Get(ctx, "m-1"); err == nil {
			break
		}
		time.Sleep(time.Millisecond) // until the buffer flushed it
	}
	if m.Priority != 6 {
		t.Fatalf("Inspector.Get: priority %d; want 6", m.Priority)
	}
}

package engine

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestCallCtx(t *testing.T) {
	t.Parallel()
	t.Run("deadline ends Done", func(t *testing.T) {
		ctx, cancel := newCallCtx(context.Background(), time.Now().Add(20*time.Millisecond))
		defer cancel()
		if ctx.Err() != nil {
			t.Fatalf("Err %v before the deadline", ctx.Err())
		}
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("Done not closed after the deadline")
		}
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err %v, want DeadlineExceeded", ctx.Err())
		}
	})
	t.Run("Err without Done", func(t *testing.T) {
		ctx, cancel := newCallCtx(context.Background(), time.Now().Add(time.Millisecond))
		defer cancel()
		time.Sleep(5 * time.Millisecond)
		if !errors.Is(ctx.Err(), context.DeadlineExceeded) {
			t.Fatalf("Err %v, want DeadlineExceeded", ctx.Err())
		}
		select {
		case <-ctx.Done():
		default:
			t.Fatal("Done not closed once Err reported the deadline")
		}
	})
	t.Run("cancel", func(t *testing.T) {
		ctx, cancel := newCallCtx(context.Background(), time.Now().Add(time.Hour))
		done := ctx.Done()
		child, stop := context.WithCancel(ctx)
		defer stop()
		ran := make(chan struct{})
		context.AfterFunc(ctx, func() { close(ran) })
		cancel()
		<-done
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("Err %v, want Canceled", ctx.Err())
		}
		select {
		case <-child.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a child context did not end with its parent")
		}
		select {
		case <-ran:
		case <-time.After(5 * time.Second):
			t.Fatal("context.AfterFunc did not run")
		}
		if dl, ok := ctx.Deadline(); !ok || time.Until(dl) < 50*time.Minute {
			t.Fatalf("Deadline %v, %v", dl, ok)
		}
	})
	t.Run("values and a parent that ends", func(t *testing.T) {
		type key struct{}
		ctx, cancel := newCallCtx(context.WithValue(context.Background(), key{}, 7), time.Now().Add(time.Hour))
		defer cancel()
		if ctx.Value(key{}) != 7 {
			t.Fatalf("Value %v, want the parent's 7", ctx.Value(key{}))
		}
		parent, pcancel := context.WithCancel(context.Background())
		ctx2, cancel2 := newCallCtx(parent, time.Now().Add(time.Hour))
		defer cancel2()
		pcancel()
		select {
		case <-ctx2.Done():
		case <-time.After(5 * time.Second):
			t.Fatal("a call context did not end with a parent that ended")
		}
	})
}

// TestInflightWrites checks that shorten reaches exactly the registered writes, whichever of
// them (first, middle, last registered) left before.
func TestInflightWrites(t *testing.T) {
	t.Parallel()
	far := time.Now().Add(time.Hour)
	for _, tc := range []struct {
		name   string
		remove []int // indexes of the three writes that end before Close
	}{
		{"none left", nil},
		{"first left", []int{0}},
		{"middle left", []int{1}},
		{"last left", []int{2}},
		{"all left", []int{2, 0, 1}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			var w inflightWrites
			var regs [3]*callCtx
			for i := range regs {
				ctx, cancel := newCallCtx(context.Background(), far)
				t.Cleanup(cancel)
				regs[i] = w.add(ctx)
				if regs[i] == nil {
					t.Fatalf("write %d: a call context was not registered", i)
				}
			}
			gone := map[int]bool{}
			for _, i := range tc.remove {
				w.remove(regs[i])
				w.remove(regs[i]) // a second remove is harmless
				gone[i] = true
			}
			soon := time.Now().Add(time.Minute)
			w.shorten(soon)
			for i, c := range regs {
				d, _ := c.Deadline()
				if shortened := d.Equal(soon); shortened == gone[i] {
					t.Errorf("write %d (left: %v): deadline %v, shortened %v", i, gone[i], d, shortened)
				}
			}
		})
	}
	t.Run("other contexts are not registered", func(t *testing.T) {
		t.Parallel()
		var w inflightWrites
		ctx, cancel := context.WithTimeout(context.Background(), time.Hour)
		defer cancel()
		if c := w.add(ctx); c != nil {
			t.Fatal("a context.WithTimeout context was registered")
		}
		w.remove(nil)
	})
}

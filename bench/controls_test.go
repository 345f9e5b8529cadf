package main

import (
	"context"
	"errors"
	"testing"

	"github.com/txmq/txmq"
	"github.com/txmq/txmq/core"
)

// TestControlsMemory runs every side of the controls scenario once on the memory backend with
// a few messages: each side stores and delivers all of them (BurnDown and ctlFill exit the
// process otherwise).
func TestControlsMemory(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	be, err := txmq.OpenBackend(ctx, "memory://")
	if err != nil {
		t.Fatal(err)
	}
	defer be.Close()
	for _, side := range []string{"plain", "prio", "fair", "limit", "unique"} {
		for _, batch := range []int{1, 100} {
			reg, q, _, err := ctlFill(ctx, be, side, "t-"+side, batch, 250, 10)
			if err != nil {
				t.Fatalf("%s, batch %d: %v", side, batch, err)
			}
			if d := burnDown(ctx, be, reg, q, 250); d <= 0 {
				t.Fatalf("%s, batch %d: burn-down took %v", side, batch, d)
			}
		}
	}
}

// bareBackend hides every optional capability of the backend it holds (it has no Unwrap),
// as an adapter without them would.
type bareBackend struct{ core.Backend }

// TestControlsRefused checks that a backend refusing a side's setting comes back as
// errRefused, the figure the scenario prints, not an exit (a memory backend with its
// capabilities hidden refuses all three), and that one implementing the capability is not
// refused (SQLite implements all three).
func TestControlsRefused(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	sqlite, err := txmq.OpenBackend(ctx, "sqlite://"+t.TempDir()+"/ctl.db")
	if err != nil {
		t.Fatal(err)
	}
	defer sqlite.Close()
	mem, err := txmq.OpenBackend(ctx, "memory://")
	if err != nil {
		t.Fatal(err)
	}
	defer mem.Close()
	for _, side := range []string{"prio", "fair", "limit"} {
		if _, _, _, err := ctlFill(ctx, sqlite, side, "t-"+side, 1, 10, 1); err != nil {
			t.Errorf("%s on sqlite, which implements it: %v", side, err)
		}
		if _, _, _, err := ctlFill(ctx, bareBackend{mem}, side, "t-"+side, 1, 10, 1); !errors.Is(err, errRefused) {
			t.Errorf("%s on a backend without the capability: got %v, want the refusal", side, err)
		}
	}
}

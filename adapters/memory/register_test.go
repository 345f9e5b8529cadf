package memory

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestOpenBackend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	open := func(raw string) core.Backend {
		t.Helper()
		be, err := core.OpenBackend(ctx, raw)
		if err != nil {
			t.Fatalf("OpenBackend(%q): %v", raw, err)
		}
		return be
	}

	a, b := open("memory://"), open("memory://")
	if a == b {
		t.Fatal("memory:// returned the same backend twice; want private ones")
	}
	a.Close()
	b.Close()

	x1 := open("memory://test-open-shared?lease=5s&fetch_limit=7&seed=3")
	x2 := open("memory://test-open-shared")
	if x1 != x2 {
		t.Fatal("memory://NAME returned two backends; want one shared per name")
	}
	mb := x1.(*Backend)
	if mb.defaultLease != 5*time.Second || mb.fetchLimit != 7 {
		t.Fatalf("options from the URL not applied: lease %v fetch_limit %d", mb.defaultLease, mb.fetchLimit)
	}
	x1.Close()
	x3 := open("memory://test-open-shared")
	defer x3.Close()
	if x3 == x1 {
		t.Fatal("a closed named backend was reopened; want a fresh one")
	}

	for _, bad := range []string{"memory://?lease=-1s", "memory://?fetch_limit=x", "memory://?nope=1"} {
		if _, err := core.OpenBackend(ctx, bad); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("OpenBackend(%q): %v, want ErrInvalidConfig", bad, err)
		}
	}
}

package testenv

import (
	"context"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// IdlePickup checks that an adapter's idle-queue savings keep pickups fast: with be's fetch
// for req (its queues idle) waiting, publish stores a batch on queue through another client,
// and the fetch must return that one claim within limit of the publish.
func IdlePickup(t *testing.T, be core.Backend, req core.FetchRequest, queue string, limit time.Duration, publish func()) []*core.Claim {
	t.Helper()
	got := make(chan []*core.Claim, 1)
	go func() {
		r := req
		r.Wait = 5 * time.Second
		cs, err := be.Fetch(context.Background(), r)
		if err != nil {
			t.Error(err)
		}
		got <- cs
	}()
	time.Sleep(50 * time.Millisecond)
	sent := time.Now()
	publish()
	cs := <-got
	if len(cs) != 1 || cs[0].Queue != queue {
		t.Fatalf("after a publish to idle queue %q: %d claims", queue, len(cs))
	}
	if lat := time.Since(sent); lat > limit {
		t.Fatalf("idle queue %q took %v to pick up a publish; want at most %v", queue, lat, limit)
	}
	return cs
}

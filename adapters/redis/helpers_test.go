package redis

import (
	"context"
	"fmt"
	"testing"
	"time"

	goredis "github.com/redis/go-redis/v9"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// testAddr returns the test server's host:port (skipping or failing as testenv decides).
func testAddr(t testing.TB) string {
	t.Helper()
	o, err := goredis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatalf("TXMQ_REDIS_URL: %v", err)
	}
	return o.Addr
}

// testOptions returns go-redis options for the test server.
func testRedisOptions(t testing.TB) *goredis.Options {
	t.Helper()
	o, err := goredis.ParseURL(testenv.RedisURL(t))
	if err != nil {
		t.Fatalf("TXMQ_REDIS_URL: %v", err)
	}
	return o
}

// uniquePrefix returns a new key prefix and deletes every key under it in t.Cleanup.
func uniquePrefix(t testing.TB) string {
	t.Helper()
	prefix := testenv.UniqueName("txmqt_")
	ro := testRedisOptions(t)
	t.Cleanup(func() { deletePrefix(t, ro, prefix) })
	return prefix
}

// deletePrefix removes the keys of prefix (never FLUSHALL: the server is shared).
func deletePrefix(t testing.TB, ro *goredis.Options, prefix string) {
	c := goredis.NewClient(ro)
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	iter := c.Scan(ctx, 0, "{"+prefix+":*", 1000).Iterator()
	var keys []string
	for iter.Next(ctx) {
		keys = append(keys, iter.Val())
	}
	if err := iter.Err(); err != nil {
		t.Errorf("cleanup scan %s: %v", prefix, err)
		return
	}
	for len(keys) > 0 {
		n := min(len(keys), 500)
		if err := c.Del(ctx, keys[:n]...).Err(); err != nil {
			t.Errorf("cleanup del %s: %v", prefix, err)
			return
		}
		keys = keys[n:]
	}
}

// newTestBackend opens a Backend on the test server under prefix (a new unique one when
// empty), closed in t.Cleanup.
func newTestBackend(t testing.TB, prefix string, mod func(o *Options)) *Backend {
	t.Helper()
	ro := testRedisOptions(t)
	if prefix == "" {
		prefix = uniquePrefix(t)
	}
	o := &Options{Addr: ro.Addr, Username: ro.Username, Password: ro.Password, DB: ro.DB, TLS: ro.TLSConfig, Prefix: prefix,
		GoRedisLogs: true} // go-redis's lines at Debug: none on stderr in the outage tests
	if mod != nil {
		mod(o)
	}
	be, err := New(o)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	return be
}

func publish(t testing.TB, be *Backend, queue, id string, notBefore time.Time) {
	t.Helper()
	err := be.Publish(context.Background(), core.OutgoingBatch{ID: id, Queue: queue, Body: []byte("body-" + id), NotBefore: notBefore})
	if err != nil {
		t.Fatalf("publish %s: %v", id, err)
	}
}

func publishN(t testing.TB, be *Backend, queue string, n int) {
	t.Helper()
	for i := range n {
		publish(t, be, queue, fmt.Sprintf("%s-%d", queue, i), time.Time{})
	}
}

// fetchLease claims with Wait 0 and the given lease.
func fetchLease(t testing.TB, be *Backend, lease time.Duration, slots ...core.QueueSlots) []*core.Claim {
	t.Helper()
	cs, err := be.Fetch(context.Background(), core.FetchRequest{Node: "n1", Queues: slots, Lease: lease})
	if err != nil {
		t.Fatalf("fetch: %v", err)
	}
	return cs
}

// fetch claims with Wait 0 and a 10 s lease.
func fetch(t testing.TB, be *Backend, slots ...core.QueueSlots) []*core.Claim {
	t.Helper()
	return fetchLease(t, be, 10*time.Second, slots...)
}

func one(queue string) core.QueueSlots { return core.QueueSlots{Queue: queue, Free: 1} }

func all(queue string) core.QueueSlots { return core.QueueSlots{Queue: queue, Free: core.Unlimited} }

func excl(queue string) core.QueueSlots {
	return core.QueueSlots{Queue: queue, Free: core.Unlimited, Exclusive: true}
}

func depth(t testing.TB, be *Backend, queue string) core.Depth {
	t.Helper()
	d, err := be.Depths(context.Background(), []string{queue})
	if err != nil {
		t.Fatalf("depths: %v", err)
	}
	return d[queue].Counts() // OldestReady is checked by the Depth tests
}

func must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

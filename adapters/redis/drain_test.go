package redis_test

import (
	"context"
	"strings"
	"testing"
	"time"

	_ "github.com/txmq/txmq/adapters/redis"
	_ "github.com/txmq/txmq/adapters/sqljobs"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/drain/draintest"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestRollingDeploySQLJobsToRedis: the rolling deploy of draintest.RollingDeploy from SQL jobs
// (Postgres) to Redis, each reached through its URL as TXMQ_BACKEND and TXMQ_DRAIN_BACKENDS
// give them, the node on the old setting with a client of its own.
func TestRollingDeploySQLJobsToRedis(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	pool := testenv.PostgresPool(t)
	oldURL := withParam(testenv.PostgresURL(t), "txmq_schema="+testenv.PostgresSchema(t, pool))
	newURL := withParam(testenv.RedisURL(t), "txmq_prefix="+testenv.UniqueName("drain"))
	open := func(u string) core.Backend {
		t.Helper()
		be, err := core.OpenBackend(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		return be
	}
	primary, oldClient, oldPublisher := open(newURL), open(oldURL), open(oldURL)
	t.Cleanup(func() { _ = oldPublisher.Close() })
	draintest.RollingDeploy(t, primary, oldClient, oldPublisher, drain.Options{
		CheckInterval: 100 * time.Millisecond, RecheckInterval: 300 * time.Millisecond,
	})
}

// TestOrderedOldBackendFirstReal: draintest.OrderedOldFirst from SQL jobs to Redis and back,
// each reached through its URL.
func TestOrderedOldBackendFirstReal(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	pool := testenv.PostgresPool(t)
	sqlURL := func() string {
		return withParam(testenv.PostgresURL(t), "txmq_schema="+testenv.PostgresSchema(t, pool))
	}
	redisURL := func() string {
		return withParam(testenv.RedisURL(t), "txmq_prefix="+testenv.UniqueName("drainorder"))
	}
	open := func(t *testing.T, u string) core.Backend {
		t.Helper()
		be, err := core.OpenBackend(context.Background(), u)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = be.Close() })
		return be
	}
	t.Run("sqljobs to redis", func(t *testing.T) {
		t.Parallel()
		draintest.OrderedOldFirst(t, open(t, redisURL()), open(t, sqlURL()))
	})
	t.Run("redis to sqljobs", func(t *testing.T) {
		t.Parallel()
		draintest.OrderedOldFirst(t, open(t, sqlURL()), open(t, redisURL()))
	})
}

// withParam returns raw with the query parameter kv ("name=value") added.
func withParam(raw, kv string) string {
	if strings.Contains(raw, "?") {
		return raw + "&" + kv
	}
	return raw + "?" + kv
}

package drain_test

import (
	"context"
	"testing"
	"time"

	_ "github.com/txmq/txmq/adapters/all" // every backend's URL scheme

	_ "github.com/txmq/txmq/adapters/redis"
	_ "github.com/txmq/txmq/adapters/sqljobs"
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/txmqtest/testenv"
)

// TestRollingDeploySQLJobsToRedis: the rolling deploy of rollingDeploy from SQL jobs
// (Postgres) to Redis, each reached through its URL as TXMQ_BACKEND and TXMQ_DRAIN_BACKENDS
// give them, the node on the old setting with a client of its own.
func TestRollingDeploySQLJobsToRedis(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("needs Postgres and Redis")
	}
	pool := testenv.PostgresPool(t)
	oldURL := testenv.PostgresURL(t) + sep(testenv.PostgresURL(t)) + "txmq_schema=" + testenv.PostgresSchema(t, pool)
	newURL := testenv.RedisURL(t) + sep(testenv.RedisURL(t)) + "txmq_prefix=" + testenv.UniqueName("drain")
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
	rollingDeploy(t, primary, oldClient, oldPublisher, drain.Options{
		CheckInterval: 100 * time.Millisecond, RecheckInterval: 300 * time.Millisecond,
	})
}

// sep is the separator before a query parameter added to raw.
func sep(raw string) string {
	for _, c := range raw {
		if c == '?' {
			return "&"
		}
	}
	return "?"
}

// Package testenv tells tests where the real services of this machine are (PostgreSQL, Redis,
// an SQS emulator) and whether to skip or fail when one is missing.
//
// Each endpoint comes from an environment variable with a local default:
//
//	TXMQ_POSTGRES_URL   postgres://postgres@127.0.0.1:5432/test?sslmode=disable
//	TXMQ_PGBOUNCER_URL  postgres://postgres@127.0.0.1:6432/test?sslmode=disable (PgBouncer,
//	                    transaction pooling, in front of TXMQ_POSTGRES_URL's server)
//	TXMQ_REDIS_URL      redis://127.0.0.1:6379/0
//	TXMQ_REDIS_CLUSTER_URL  unset: tests that need a Redis Cluster skip (fail in CI); services.sh sets it
//	TXMQ_SQS_ENDPOINT   http://127.0.0.1:4566
//	TXMQ_NATS_URL       unset: an embedded nats-server v2.15 per test binary (package github.com/txmq/txmq/adapters/nats/natstest)
//
// The service is pinged once per process (the result is cached). When it does not answer, the
// test is skipped, unless CI=true or TXMQ_REQUIRE_SERVICES=1, in which case it fails: CI must
// never turn a missing service into a green run.
package testenv

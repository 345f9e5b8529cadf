// Package all registers every backend's URL scheme. Import it for its side effect:
//
//	import _ "github.com/txmq/txmq/adapters/all"
//
// and core.OpenBackend (and txmq.Open, which imports this package) accepts memory://,
// postgres:// and postgresql:// (SQL jobs in the app database), redis:// and rediss://, sqs://
// and awssqs://, and nats://. An app that wants a smaller binary imports only the adapters it
// uses instead.
package all

// One blank import per adapter package. Keep this list to the adapters that exist and build:
// when an adapter is added, add its import here (and nothing else needs to change for its
// scheme to work in txmq.Open, the txmq command and TXMQ_BACKEND).
import (
	_ "github.com/txmq/txmq/adapters/memory"  // memory://
	_ "github.com/txmq/txmq/adapters/nats"    // nats://
	_ "github.com/txmq/txmq/adapters/redis"   // redis://, rediss://
	_ "github.com/txmq/txmq/adapters/sqljobs" // postgres://, postgresql://
	_ "github.com/txmq/txmq/adapters/sqs"     // sqs://, awssqs://
)

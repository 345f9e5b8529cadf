package all

// One blank import per adapter package. Keep this list to the adapters that exist and build:
// when an adapter is added, add its import here (and nothing else needs to change for its
// scheme to work in txmq.Open, the txmq command and TXMQ_BACKEND).
import (
	_ "github.com/txmq/txmq/adapters/memory"  // memory://
	_ "github.com/txmq/txmq/adapters/mysql"   // mysql://, mariadb:// (SQL jobs on MySQL 8 / MariaDB 10.6+)
	_ "github.com/txmq/txmq/adapters/nats"    // nats://
	_ "github.com/txmq/txmq/adapters/redis"   // redis://, rediss://
	_ "github.com/txmq/txmq/adapters/sqlite"  // sqlite://, sqlite3:// (SQL jobs in a SQLite file, no server)
	_ "github.com/txmq/txmq/adapters/sqljobs" // postgres://, postgresql://
	_ "github.com/txmq/txmq/adapters/sqs"     // sqs://, awssqs://
)

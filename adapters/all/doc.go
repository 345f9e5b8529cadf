// Package all registers every backend's URL scheme. Import it for its side effect:
//
//	import _ "github.com/txmq/txmq/adapters/all"
//
// and core.OpenBackend, txmq.OpenBackend and txmq.Open accept memory://, postgres:// and
// postgresql:// (SQL jobs in the app database), mysql:// and
// mariadb:// (SQL jobs on MySQL or MariaDB), sqlite:// and sqlite3:// (SQL jobs in a SQLite
// file, with no server), redis:// and rediss://, sqs:// and awssqs://,
// and nats://. An app that wants a smaller binary and module graph imports only the adapters
// it uses instead.
//
// It is a module of its own (go get github.com/txmq/txmq/adapters/all), the one that
// requires every adapter module (and so every backend's SDK), as the txmq command does. Its
// tests are those that need every backend at once: TestSecretsNeverLeak (every scheme's URL
// forms) and TestSwapDrill (an app binary swapped from SQL jobs to Redis through its
// settings, internal/drillapp).
package all

// Package all registers every backend's URL scheme. Import it for its side effect:
//
//	import _ "github.com/txmq/txmq/adapters/all"
//
// and core.OpenBackend (and txmq.Open, which imports this package) accepts memory://,
// postgres:// and postgresql:// (SQL jobs in the app database), redis:// and rediss://, sqs://
// and awssqs://, and nats://. An app that wants a smaller binary imports only the adapters it
// uses instead.
package all

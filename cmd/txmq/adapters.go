package main

// Every backend's URL scheme, so --backend and TXMQ_BACKEND accept memory://, postgres://,
// redis://, sqs:// and nats:// URLs.
import _ "github.com/txmq/txmq/adapters/all"

// Package natstest starts the embedded nats-server (v2.15, JetStream) the NATS adapter's tests
// use, or points them at an outside server from TXMQ_NATS_URL; and a 3-node JetStream cluster
// of nats-server processes built from the same module (StartCluster, ClusterURL, ServerBinary;
// TXMQ_NATS_CLUSTER_URL names an outside one). It is a test kit for tests only.
//
// It lives in the NATS adapter's module (github.com/txmq/txmq/adapters/nats), the one module
// whose requirements already hold the NATS server for its tests, so that neither the txmq
// module nor an app that uses another backend requires the server; the chaos module uses it
// too. ServerBinary builds the server program from the module of the test's working directory,
// which must require it.
package natstest

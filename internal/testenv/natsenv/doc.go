// Package natsenv starts the embedded nats-server (v2.15, JetStream) the NATS adapter's tests
// use, or points them at an outside server from TXMQ_NATS_URL; and a 3-node JetStream cluster
// of nats-server processes built from the same module (StartCluster, ClusterURL, ServerBinary;
// TXMQ_NATS_CLUSTER_URL names an outside one). It lives apart from testenv so that importing
// the parity suite does not pull in the NATS server.
package natsenv

// Package inspect answers the operator's questions about messages for txmq.Inspector: Get,
// List and Cancel by id, bulk cancel and run now by queue and state, and payloads. It reads
// the ledger (a core.MessageStore) when the app has one, else the backend's native lookup
// (core.BatchInspector, core.BatchEditor, core.BatchExpediter). The app API (package txmq)
// wraps it; the engine never calls it.
package inspect

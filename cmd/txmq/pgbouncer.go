package main

import (
	"github.com/txmq/txmq/outbox"
)

// databaseURL takes the PgBouncer parameters (txmq_pgbouncer, txmq_listen_url,
// txmq_poll_interval; see "Behind PgBouncer" in docs/adapters.md) out of an app database URL, as
// txmq.Open does, sets what they say in o (may be nil), and returns the rest for pgx (with
// default_query_exec_mode=exec added behind PgBouncer). A keyword/value string is returned as
// it is.
func databaseURL(raw string, o *outbox.Options) (string, error) {
	return outbox.TakeURLSettings(raw, databaseSetting.String(), o)
}

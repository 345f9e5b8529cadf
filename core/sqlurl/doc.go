// Package sqlurl reads the backend URL parameters the SQL jobs adapters share (sqljobs on
// PostgreSQL, mysql on MySQL/MariaDB): txmq_schema, txmq_migrate, txmq_lease,
// txmq_fetch_limit, txmq_query_timeout, txmq_abandoned_after, txmq_reap_interval and
// txmq_poll_interval. Each adapter maps the Settings onto its own Options and checks them.
package sqlurl

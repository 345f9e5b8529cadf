package main

import (
	"net/url"
	"strings"

	"github.com/txmq/txmq/internal/pgpooler"
)

// databaseURL takes the PgBouncer parameters (txmq_pgbouncer, txmq_listen_url,
// txmq_poll_interval; see "Behind PgBouncer" in docs/adapters.md) out of an app database URL, as
// txmq.Open does, and returns the rest for pgx (with default_query_exec_mode=exec added
// behind PgBouncer) and what they set. A keyword/value string is returned as it is.
func databaseURL(raw string) (string, pgpooler.Settings, error) {
	lower := strings.ToLower(raw)
	if !strings.HasPrefix(lower, "postgres://") && !strings.HasPrefix(lower, "postgresql://") {
		return raw, pgpooler.Settings{}, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw, pgpooler.Settings{}, nil // pgx reports it
	}
	q := u.Query()
	s, err := pgpooler.Take(databaseSetting.String(), q)
	if err != nil {
		return "", pgpooler.Settings{}, err
	}
	u.RawQuery = q.Encode()
	return u.String(), s, nil
}

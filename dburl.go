package txmq

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/pgpooler"
)

// databaseConfig parses the app database URL (Config.DatabaseURL): its txmq_pgbouncer,
// txmq_listen_url and txmq_poll_interval parameters (see outbox.Options.PgBouncer, ListenURL
// and PollInterval) are taken out, with txmq_pgbouncer=true also setting pgx's
// default_query_exec_mode=exec unless the URL names a mode, and the rest goes to
// pgxpool.ParseConfig. A keyword/value string (host=... dbname=...) goes to pgx as it is.
// Errors wrap core.ErrInvalidConfig and name TXMQ_DATABASE_URL.
func databaseConfig(raw string) (*pgxpool.Config, pgpooler.Settings, error) {
	bad := func(err error) error {
		return fmt.Errorf("%w: %s %s does not parse: %s; use postgres://user:password@host:5432/db", core.ErrInvalidConfig, EnvDatabaseURL, core.Redact(raw), core.RedactText(err.Error(), raw))
	}
	var s pgpooler.Settings
	rest := raw
	if lower := strings.ToLower(raw); strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
		u, err := url.Parse(raw)
		if err != nil {
			return nil, pgpooler.Settings{}, bad(err)
		}
		q := u.Query()
		if s, err = pgpooler.Take(EnvDatabaseURL, q); err != nil {
			return nil, pgpooler.Settings{}, core.RedactError(err, raw)
		}
		u.RawQuery = q.Encode()
		rest = u.String()
	}
	cfg, err := pgxpool.ParseConfig(rest)
	if err != nil {
		return nil, pgpooler.Settings{}, bad(err)
	}
	return cfg, s, nil
}

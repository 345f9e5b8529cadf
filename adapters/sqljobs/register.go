package sqljobs

import (
	"context"
	"fmt"
	"net/url"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/sqlurl"
	"github.com/txmq/txmq/internal/pgpooler"
)

// Schemes are the URL schemes this package registers with core.RegisterBackend.
var Schemes = []string{"postgres", "postgresql"}

func init() { core.RegisterSchemes(Open, Schemes...) }

// urlParams are the query parameters Open consumes, with what each sets.
var urlParams = map[string]string{
	"txmq_schema":          "Options.Schema",
	"txmq_migrate":         "run Migrate first (true or false, default true)",
	"txmq_lease":           "nothing: accepted and ignored (a Go duration; the node's NodeOptions.Lease decides)",
	"txmq_fetch_limit":     "nothing: accepted and ignored (a positive number; the node's NodeOptions.FetchMax decides)",
	"txmq_query_timeout":   "Options.QueryTimeout (a Go duration)",
	"txmq_abandoned_after": "Options.AbandonedAfter (a Go duration)",
	"txmq_reap_interval":   "Options.ReapInterval (a Go duration; negative turns the reaper off)",
	"txmq_pgbouncer":       "Options.PgBouncer (true or false); true also sets default_query_exec_mode=exec unless the URL names a mode",
	"txmq_listen_url":      "Options.ListenURL (a direct postgres:// URL, query-escaped)",
	"txmq_poll_interval":   "Options.PollInterval (a Go duration)",
}

// Open opens a Backend from a URL, as core.OpenBackend does for
// TXMQ_BACKEND=postgres://user:pass@host:5432/db?sslmode=disable&txmq_schema=jobs.
//
// Query parameters starting with txmq_ set Options and are removed before the rest of the URL
// goes to pgxpool.ParseConfig (so pool_max_conns, connect_timeout, sslmode and the like work
// as in pgx): txmq_schema, txmq_migrate, txmq_lease, txmq_fetch_limit, txmq_query_timeout,
// txmq_abandoned_after and txmq_reap_interval; and, for a URL that goes through PgBouncer in
// transaction pooling mode, txmq_pgbouncer=true (Options.PgBouncer; it also sets pgx's
// default_query_exec_mode=exec unless the URL names another mode), txmq_listen_url (a direct,
// query-escaped postgres:// URL for the LISTEN connection: Options.ListenURL) and
// txmq_poll_interval (Options.PollInterval). An unknown txmq_ parameter is an error wrapping
// core.ErrInvalidConfig that lists the accepted ones. Open creates its own pool, closed by
// Backend.Close, whose sessions plan with enable_seqscan off and reuse generic plans
// (SessionPlanGuard; not with txmq_pgbouncer=true, nor when the URL names enable_seqscan
// itself), and runs Migrate unless txmq_migrate=false. A dead-letter sink for the reaper
// cannot be given in a URL: use New for that.
func Open(ctx context.Context, u *url.URL) (core.Backend, error) {
	return open(ctx, u)
}

func open(ctx context.Context, u *url.URL) (*Backend, error) {
	opts, migrate, cfg, err := parseConfig(u)
	if err != nil {
		return nil, err
	}
	if _, named := cfg.ConnConfig.RuntimeParams[planGuardParam]; !named && !opts.PgBouncer {
		SessionPlanGuard(cfg) // the pool is the Backend's alone
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return nil, classify("creating the pool for "+core.RedactURL(u), core.RedactError(err, u.String()))
	}
	if migrate {
		if err := Migrate(ctx, pool, opts); err != nil {
			pool.Close()
			return nil, err
		}
	}
	be, err := New(ctx, pool, opts)
	if err != nil {
		pool.Close()
		return nil, err
	}
	be.ownPool = true
	return be, nil
}

// parseConfig returns what a postgres:// URL sets: the Options, whether to migrate, and the
// pool configuration (pgxpool.ParseConfig of the rest), without I/O.
func parseConfig(u *url.URL) (*Options, bool, *pgxpool.Config, error) {
	opts, migrate, rest, err := parseURL(u)
	if err != nil {
		return nil, false, nil, err
	}
	cfg, err := pgxpool.ParseConfig(rest.String())
	if err != nil {
		return nil, false, nil, fmt.Errorf("%w: sqljobs: backend URL %s: %v", core.ErrInvalidConfig, core.RedactURL(rest), core.RedactError(err, u.String()))
	}
	return opts, migrate, cfg, nil
}

// parseURL takes the txmq_ parameters out of u and returns the Options they set, whether to
// migrate, and u without them.
func parseURL(u *url.URL) (*Options, bool, *url.URL, error) {
	opts := &Options{}
	q := u.Query()
	pooler, err := pgpooler.Take("sqljobs: backend URL", q)
	if err != nil {
		return nil, false, nil, err
	}
	opts.PgBouncer, opts.ListenURL, opts.PollInterval = pooler.PgBouncer, pooler.ListenURL, pooler.PollInterval
	set, err := sqlurl.Take("sqljobs", q, urlParams)
	if err != nil {
		return nil, false, nil, err
	}
	opts.Schema, opts.QueryTimeout, opts.AbandonedAfter, opts.ReapInterval = set.Schema, set.QueryTimeout, set.AbandonedAfter, set.ReapInterval
	if _, err := opts.withDefaults(); err != nil {
		return nil, false, nil, err
	}
	rest := *u
	rest.RawQuery = q.Encode()
	return opts, set.Migrate, &rest, nil
}

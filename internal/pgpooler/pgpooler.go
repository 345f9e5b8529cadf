// Package pgpooler reads the URL parameters that say a PostgreSQL URL goes through a
// connection pooler in transaction pooling mode (PgBouncer), for sqljobs' backend URL and the
// app database URL (TXMQ_DATABASE_URL) alike.
//
// Behind such a pooler a server connection is lent to a client for one transaction only, so
// nothing of a session survives from one statement to the next: no named prepared statements
// (pgx's default statement cache), no LISTEN, no session-level SET or advisory lock. The
// parameters are:
//
//	txmq_pgbouncer=true       the URL goes through a transaction pooler: pgx runs every statement
//	                          with default_query_exec_mode=exec (unnamed statements, one round
//	                          trip) unless the URL names another compatible mode, and LISTEN
//	                          never goes through it
//	txmq_listen_url=URL       a direct (not pooled) PostgreSQL URL, query-escaped, on which the
//	                          one LISTEN connection is opened; without it, waits poll
//	txmq_poll_interval=DUR    how often a wait polls when there is no LISTEN connection
//
// Take removes them from a URL's query before the rest goes to pgx, which would otherwise
// send them to the server as run-time settings.
package pgpooler

import (
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
)

// The URL parameters Take consumes.
const (
	// ParamPgBouncer says the URL goes through a transaction-pooling pooler (true or false).
	ParamPgBouncer = "txmq_pgbouncer"
	// ParamListenURL is a direct PostgreSQL URL for the LISTEN connection.
	ParamListenURL = "txmq_listen_url"
	// ParamPollInterval is how often a wait polls without a LISTEN connection.
	ParamPollInterval = "txmq_poll_interval"
)

// execModeParam is pgx's connection-string parameter naming its query execution mode.
const execModeParam = "default_query_exec_mode"

// Params describes the parameters Take consumes, for an "unknown parameter" error.
var Params = map[string]string{
	ParamPgBouncer:    "the URL goes through PgBouncer in transaction pooling mode (true or false)",
	ParamListenURL:    "a direct PostgreSQL URL (query-escaped) for the LISTEN connection",
	ParamPollInterval: "how often waits poll without a LISTEN connection (a Go duration)",
}

// Settings are what the parameters set.
type Settings struct {
	// PgBouncer: the URL goes through a transaction-pooling pooler.
	PgBouncer bool
	// ListenURL is the direct URL for LISTEN; empty: none given.
	ListenURL string
	// PollInterval is the polling period without LISTEN; 0: the caller's default.
	PollInterval time.Duration
}

// Take removes the parameters from q (case-insensitively) and returns what they set. With
// txmq_pgbouncer=true and no default_query_exec_mode in q it sets default_query_exec_mode=exec
// in q; a mode that cannot work through a transaction pooler (describe_exec, whose two round
// trips may land on two server connections) is an error. who names the setting in errors
// ("sqljobs: backend URL", "TXMQ_DATABASE_URL"). Errors wrap core.ErrInvalidConfig.
func Take(who string, q url.Values) (Settings, error) {
	var s Settings
	for key, vals := range q {
		v := vals[len(vals)-1]
		var err error
		switch strings.ToLower(key) {
		case ParamPgBouncer:
			if s.PgBouncer, err = strconv.ParseBool(v); err != nil {
				err = fmt.Errorf("use true or false")
			}
		case ParamListenURL:
			if s.ListenURL = v; !strings.HasPrefix(v, "postgres://") && !strings.HasPrefix(v, "postgresql://") {
				err = fmt.Errorf("want a postgres:// URL of the server itself (not the pooler), query-escaped")
			}
		case ParamPollInterval:
			s.PollInterval, err = core.ParsePositiveDuration(v)
		default:
			continue
		}
		if err != nil {
			shown := v
			if strings.ToLower(key) == ParamListenURL {
				shown = core.Redact(v)
			}
			return Settings{}, fmt.Errorf("%w: %s parameter %s=%q: %v", core.ErrInvalidConfig, who, key, shown, err)
		}
		q.Del(key)
	}
	if s.PgBouncer {
		switch mode := q.Get(execModeParam); mode {
		case "":
			q.Set(execModeParam, "exec")
		case "describe_exec":
			return Settings{}, fmt.Errorf("%w: %s: %s=%s cannot work through PgBouncer (its describe and execute round trips may use two server connections); use exec, cache_describe or simple_protocol, or leave it out (exec)", core.ErrInvalidConfig, who, execModeParam, mode)
		}
	}
	return s, nil
}

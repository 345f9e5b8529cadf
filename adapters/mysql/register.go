package mysql

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/core/sqlurl"
)

// Schemes are the URL schemes this package registers with core.RegisterBackend.
var Schemes = []string{"mysql", "mariadb"}

func init() { core.RegisterSchemes(Open, Schemes...) }

// defaultPort is MySQL's port, used when the URL names none.
const defaultPort = "3306"

// urlParams are the query parameters Open consumes, with what each sets.
var urlParams = map[string]string{
	"txmq_schema":          "Options.Schema (a database name; default the URL's database)",
	"txmq_migrate":         "run Migrate first (true or false, default true)",
	"txmq_lease":           "nothing: accepted and ignored (a Go duration; the node's NodeOptions.Lease decides)",
	"txmq_fetch_limit":     "nothing: accepted and ignored (a positive number; the node's NodeOptions.FetchMax decides)",
	"txmq_query_timeout":   "Options.QueryTimeout (a Go duration)",
	"txmq_abandoned_after": "Options.AbandonedAfter (a Go duration)",
	"txmq_reap_interval":   "Options.ReapInterval (a Go duration; negative turns the reaper off)",
	"txmq_poll_interval":   "Options.PollInterval (a Go duration)",
}

// Open opens a Backend from a URL, as core.OpenBackend does for
// TXMQ_BACKEND=mysql://user:pass@host:3306/app?txmq_poll_interval=50ms.
//
// The URL's user, password, host (port 3306 by default) and database make the driver's
// connection; query parameters starting with txmq_ set Options (txmq_schema, txmq_migrate,
// txmq_lease, txmq_fetch_limit, txmq_query_timeout, txmq_abandoned_after, txmq_reap_interval,
// txmq_poll_interval) and the others are the driver's DSN parameters (tls, timeout,
// readTimeout, charset, ... as in github.com/go-sql-driver/mysql). An unknown txmq_
// parameter is an error wrapping core.ErrInvalidConfig that lists the accepted ones. Open
// creates its own *sql.DB, closed by Backend.Close, and runs Migrate unless
// txmq_migrate=false. A dead-letter sink for the reaper cannot be given in a URL: use New.
func Open(ctx context.Context, u *url.URL) (core.Backend, error) {
	return open(ctx, u)
}

func open(ctx context.Context, u *url.URL) (*Backend, error) {
	opts, migrate, cfg, err := parseConfig(u)
	if err != nil {
		return nil, err
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, fmt.Errorf("%w: mysql: backend URL %s: %v", core.ErrInvalidConfig, core.RedactURL(u), core.RedactError(err, u.String()))
	}
	db := sql.OpenDB(conn)
	if migrate {
		if err := Migrate(ctx, db, opts); err != nil {
			_ = db.Close()
			return nil, core.RedactError(err, u.String())
		}
	}
	be, err := New(ctx, db, opts)
	if err != nil {
		_ = db.Close()
		return nil, core.RedactError(err, u.String())
	}
	be.ownDB = true
	return be, nil
}

// parseConfig returns what a mysql:// URL sets: the Options, whether to migrate, and the
// driver's configuration, without I/O.
func parseConfig(u *url.URL) (*Options, bool, *gomysql.Config, error) {
	opts, migrate, rest, err := parseURL(u)
	if err != nil {
		return nil, false, nil, err
	}
	cfg, err := gomysql.ParseDSN("/?" + rest.Encode())
	if rest.Encode() == "" {
		cfg, err = gomysql.ParseDSN("/")
	}
	if err != nil {
		return nil, false, nil, fmt.Errorf("%w: mysql: backend URL %s: a driver parameter: %v; see github.com/go-sql-driver/mysql for its DSN parameters", core.ErrInvalidConfig, core.RedactURL(u), core.RedactError(err, u.String()))
	}
	if u.Host == "" {
		return nil, false, nil, fmt.Errorf("%w: mysql: backend URL %s names no host; use mysql://user:password@host:3306/database", core.ErrInvalidConfig, core.RedactURL(u))
	}
	host, port := u.Hostname(), u.Port()
	if port == "" {
		port = defaultPort
	}
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(host, port)
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if strings.Contains(cfg.DBName, "/") {
		return nil, false, nil, fmt.Errorf("%w: mysql: backend URL %s: the path must be one database name; use mysql://user:password@host:3306/database", core.ErrInvalidConfig, core.RedactURL(u))
	}
	if _, set := rest["maxAllowedPacket"]; !set {
		cfg.MaxAllowedPacket = 0 // the server's max_allowed_packet, read at connect
	}
	if _, set := rest[lockWaitVar]; !set {
		if cfg.Params == nil {
			cfg.Params = map[string]string{}
		}
		cfg.Params[lockWaitVar] = strconv.Itoa(lockWaitSeconds(opts.QueryTimeout))
	}
	if opts.Schema == "" && cfg.DBName == "" {
		return nil, false, nil, fmt.Errorf("%w: mysql: backend URL %s names no database; add /database to the URL or set txmq_schema", core.ErrInvalidConfig, core.RedactURL(u))
	}
	return opts, migrate, cfg, nil
}

// parseURL takes the txmq_ parameters out of u's query and returns the Options they set,
// whether to migrate, and the rest of the query.
func parseURL(u *url.URL) (*Options, bool, url.Values, error) {
	q := u.Query()
	set, err := sqlurl.Take("mysql", q, urlParams)
	if err != nil {
		return nil, false, nil, err
	}
	opts := &Options{
		Schema:         set.Schema,
		QueryTimeout:   set.QueryTimeout,
		AbandonedAfter: set.AbandonedAfter,
		ReapInterval:   set.ReapInterval,
		PollInterval:   set.PollInterval,
	}
	if _, err := opts.withDefaults(); err != nil {
		return nil, false, nil, err
	}
	return opts, set.Migrate, q, nil
}

package appdb

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/url"
	"strings"

	gomysql "github.com/go-sql-driver/mysql"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/outbox"
)

// Schemes are the TXMQ_DATABASE_URL schemes this package registers with
// outbox.RegisterDatabase: importing it (blank) lets txmq.Open and the command line use a
// MySQL or MariaDB app database.
var Schemes = []string{"mysql", "mariadb"}

func init() {
	outbox.RegisterDatabase(outbox.Database{Open: OpenStore, Migrate: migrateURL}, Schemes...)
}

// Config turns a mysql:// app database URL (mysql://user:password@host:3306/app?param=...)
// into the driver's configuration. The query parameters are the driver's DSN parameters
// (tls, timeout, charset, ... as in github.com/go-sql-driver/mysql); txmq_ parameters are
// refused here (the app database's settings are txmq.Config's: Schema, SkipMigrate).
func Config(u *url.URL) (*gomysql.Config, error) {
	q := u.Query()
	for k := range q {
		if strings.HasPrefix(k, "txmq_") {
			return nil, fmt.Errorf("%w: mysql appdb: database URL %s: parameter %s is not one of the app database's; set TXMQ_SCHEMA / TXMQ_MIGRATE instead", core.ErrInvalidConfig, core.RedactURL(u), k)
		}
	}
	cfg, err := gomysql.ParseDSN("/?" + q.Encode())
	if len(q) == 0 {
		cfg, err = gomysql.ParseDSN("/")
	}
	if err != nil {
		return nil, fmt.Errorf("%w: mysql appdb: database URL %s: a driver parameter: %v", core.ErrInvalidConfig, core.RedactURL(u), core.RedactError(err, u.String()))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%w: mysql appdb: database URL %s names no host; use mysql://user:password@host:3306/database", core.ErrInvalidConfig, core.RedactURL(u))
	}
	port := u.Port()
	if port == "" {
		port = "3306"
	}
	cfg.Net, cfg.Addr = "tcp", net.JoinHostPort(u.Hostname(), port)
	cfg.User = u.User.Username()
	cfg.Passwd, _ = u.User.Password()
	cfg.DBName = strings.TrimPrefix(u.Path, "/")
	if _, set := q["maxAllowedPacket"]; !set {
		cfg.MaxAllowedPacket = 0
	}
	cfg.ClientFoundRows = false // DeadLetter reads changed rows
	return cfg, nil
}

// OpenStore opens an outbox.Store on the MySQL/MariaDB database of u, in the database
// opts.Schema (created by the migration when missing; "" for the URL's database), migrating
// first when migrate is set. It implements outbox.DatabaseOpener; closeDB closes the *sql.DB
// it opened.
func OpenStore(ctx context.Context, u *url.URL, opts *outbox.Options, migrate bool) (*outbox.Store, func() error, error) {
	cfg, err := Config(u)
	if err != nil {
		return nil, nil, err
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return nil, nil, fmt.Errorf("%w: mysql appdb: database URL %s: %v", core.ErrInvalidConfig, core.RedactURL(u), core.RedactError(err, u.String()))
	}
	db := sql.OpenDB(conn)
	fail := func(err error) (*outbox.Store, func() error, error) {
		_ = db.Close()
		return nil, nil, core.RedactError(err, u.String())
	}
	var schema string
	if opts != nil {
		schema = opts.Schema
	}
	if err := db.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("%w: mysql appdb: database URL %s: cannot connect: %w; check the host and port and that MySQL/MariaDB runs there", core.ErrBackendUnavailable, core.RedactURL(u), err))
	}
	if migrate {
		if err := Migrate(ctx, db, schema); err != nil {
			return fail(err)
		}
	}
	d, err := NewDialect(db, schema)
	if err != nil {
		return fail(err)
	}
	s, err := outbox.NewWithDialect(d, opts)
	if err != nil {
		return fail(err)
	}
	return s, db.Close, nil
}

// migrateURL migrates the tables of the database of u (txmq migrate).
func migrateURL(ctx context.Context, u *url.URL, schema string) error {
	cfg, err := Config(u)
	if err != nil {
		return err
	}
	conn, err := gomysql.NewConnector(cfg)
	if err != nil {
		return err
	}
	db := sql.OpenDB(conn)
	defer db.Close()
	return core.RedactError(Migrate(ctx, db, schema), u.String())
}

package txmq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	_ "github.com/txmq/txmq/adapters/memory" // the embedded default, memory://
	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/drain"
	"github.com/txmq/txmq/internal/schemaset"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/outbox"
)

// App is what Open built: a node ready to publish (register listeners, then Node.Start), the
// backend it uses, and with a database the outbox Store and its pool.
type App struct {
	// Node publishes and, once started, runs listeners. Open does not start it.
	Node *Node
	// Store is the outbox and dead-letter store; nil without a database, and then its methods
	// return outbox.ErrNoDatabase (naming TXMQ_DATABASE_URL) instead of panicking. Use
	// Store.RunInTx (or WithTx) to publish inside the app's transactions; on MySQL/MariaDB
	// (TXMQ_DATABASE_URL=mysql://..., with github.com/txmq/txmq/adapters/mysql/appdb
	// imported) and SQLite (sqlite://app.db, with github.com/txmq/txmq/adapters/sqlite/appdb
	// imported) Store.RunInSQLTx (or WithSQLTx).
	Store *outbox.Store
	// Backend is the backend the node uses: the one Config.Backend names, wrapped by
	// drain.New when Config.Drain lists old backends.
	Backend core.Backend
	// Pool is the app database pool; nil without a database, and with a database other than
	// PostgreSQL (TXMQ_DATABASE_URL=mysql://... or sqlite://...: Store.RunInSQLTx then begins
	// transactions on that database). The app may use it.
	Pool *pgxpool.Pool
	// Ledger records the life of every message in the app database (Config.Ledger); nil
	// when the ledger is off. App.Inspector reads it.
	Ledger *ledger.Ledger

	backendName string       // the backend URL, redacted, for errors
	closeDB     func() error // closes an app database other than PostgreSQL (openOtherStore)

	closeOnce sync.Once
	closeErr  error
}

// Open builds an App from cfg (nil: ConfigFromEnv). It opens the backend (and the old ones to
// drain, wrapped with drain.New), then, with a database, connects, migrates the outbox tables
// (unless SkipMigrate), creates the outbox Store on the backend and starts its relay and
// recovery sweep, and finally creates the node with the Store as its Handoff and DeadLetters
// and its Pauses, Ticks, Limits and Nodes as the node's Pauses, Ticks, Limiter and
// Heartbeats. A TXMQ_DATABASE_URL of another database works when its module is linked
// (mysql:// with github.com/txmq/txmq/adapters/mysql/appdb, sqlite:// with
// github.com/txmq/txmq/adapters/sqlite/appdb): the outbox and dead letters live there, the
// ledger is refused, and the node gets the Pauses, Ticks, Limits and Nodes the database keeps
// (MySQL/MariaDB keeps all four, as PostgreSQL does; SQLite none yet); one it does not keep
// stays unset (no queue is paused, schedules do not run, a rate limit holds per node).
// On error everything opened so far is closed again. URLs appear in logs and errors with
// their passwords redacted.
func Open(ctx context.Context, cfg *Config) (*App, error) {
	if cfg == nil {
		var err error
		if cfg, err = ConfigFromEnv(); err != nil {
			return nil, err
		}
	}
	c := *cfg
	if c.Backend == "" {
		c.Backend = DefaultBackend
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	// One schema for every table: the outbox's, the dead letters' and a postgres:// backend's.
	var err error
	if c.Schema, c.Backend, err = c.resolveSchema(); err != nil {
		return nil, err
	}
	c.Drain = slices.Clone(c.Drain)
	for i, u := range c.Drain {
		c.Drain[i] = schemaset.ForDrain(c.Schema, u)
	}
	app := &App{}
	fail := func(err error) (*App, error) {
		_ = app.Close(context.WithoutCancel(ctx))
		return nil, err
	}
	backend, err := openBackend(ctx, &c)
	if err != nil {
		return nil, err
	}
	app.Backend = backend
	app.backendName = core.Redact(c.Backend)
	nodeOpts := c.Node
	if nodeOpts.Logger == nil {
		nodeOpts.Logger = c.Logger
	}
	if c.DatabaseURL != "" {
		if err := app.openStore(ctx, &c); err != nil {
			return fail(err)
		}
		if nodeOpts.Handoff == nil {
			nodeOpts.Handoff = app.Store
		}
		if nodeOpts.DeadLetters == nil {
			nodeOpts.DeadLetters = app.Store
		}
		// The schema's other tables: PostgreSQL's, and another database's when its dialect
		// keeps them (outbox.ControlDialect); nil ones stay unset (see outbox.NewWithDialect).
		if p := app.Store.Pauses(); p != nil && nodeOpts.Pauses == nil {
			nodeOpts.Pauses = p
		}
		if t := app.Store.Ticks(); t != nil && nodeOpts.Ticks == nil {
			nodeOpts.Ticks = t
		}
		if n := app.Store.Nodes(); n != nil && nodeOpts.Heartbeats == nil {
			nodeOpts.Heartbeats = n
		}
		if l := app.Store.Limits(); l != nil && nodeOpts.Limiter == nil {
			nodeOpts.Limiter = l
		}
		if app.Ledger != nil && nodeOpts.Ledger == nil {
			nodeOpts.Ledger = app.Ledger
		}
	} else if c.Ledger != nil {
		return fail(fmt.Errorf("%w: Config.Ledger is set but the app has no database: the ledger lives in the app's PostgreSQL; set %s (Config.DatabaseURL) or leave Config.Ledger nil", core.ErrInvalidConfig, EnvDatabaseURL))
	}
	if app.Node, err = NewNode(backend, &nodeOpts); err != nil {
		return fail(err)
	}
	attrs := []any{"backend", core.Redact(c.Backend)}
	if len(c.Drain) > 0 {
		attrs = append(attrs, "draining", redactAll(c.Drain))
	}
	if c.DatabaseURL != "" {
		attrs = append(attrs, "database", core.Redact(c.DatabaseURL), "schema", c.Schema)
	}
	c.Logger.Info("txmq: opened", attrs...)
	return app, nil
}

// openBackend opens the primary backend and the ones to drain.
func openBackend(ctx context.Context, c *Config) (core.Backend, error) {
	primary, err := core.OpenBackend(ctx, c.Backend)
	if err != nil {
		return nil, &settingError{setting: EnvBackend, err: core.RedactError(err, c.Backend)}
	}
	if len(c.Drain) == 0 {
		return primary, nil
	}
	olds := make([]core.Backend, 0, len(c.Drain))
	for _, u := range c.Drain {
		b, err := core.OpenBackend(ctx, u)
		if err != nil {
			for _, o := range olds {
				_ = o.Close()
			}
			_ = primary.Close()
			return nil, &settingError{setting: EnvDrainBackends, err: core.RedactError(err, u)}
		}
		olds = append(olds, b)
	}
	return drain.New(primary, olds, &drain.Options{Logger: c.Logger, CheckInterval: c.DrainCheckInterval, RecheckInterval: c.DrainRecheckInterval, Names: redactAll(c.Drain)}), nil
}

// openStore connects to the app database, migrates, and starts the outbox store.
func (a *App) openStore(ctx context.Context, c *Config) error {
	if db, other := otherDatabase(c.DatabaseURL); other {
		return a.openOtherStore(ctx, c, db)
	}
	cfg, pooler, err := databaseConfig(c.DatabaseURL)
	if err != nil {
		return err
	}
	pool, err := pgxpool.NewWithConfig(ctx, cfg)
	if err != nil {
		return fmt.Errorf("txmq: %s %s: %s", EnvDatabaseURL, core.Redact(c.DatabaseURL), core.RedactText(err.Error(), c.DatabaseURL))
	}
	a.Pool = pool
	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := pool.Ping(pctx); err != nil {
		return fmt.Errorf("txmq: %s %s: cannot connect: %s; check the host and port in %s and that PostgreSQL runs there", EnvDatabaseURL, core.Redact(c.DatabaseURL), connectCause(err, c.DatabaseURL), EnvDatabaseURL)
	}
	if c.Ledger != nil { // before the outbox: in ledger mode its relay keeps what it publishes
		if err := a.openLedger(ctx, c); err != nil {
			return err
		}
	}
	o := c.Outbox
	o.Schema, o.Backend = c.Schema, a.Backend
	if a.Ledger != nil {
		o.Backend = a.Ledger.Keeping(a.Backend)
	}
	if pooler.PgBouncer {
		o.PgBouncer = true
	}
	if pooler.ListenURL != "" {
		o.ListenURL = pooler.ListenURL
	}
	if pooler.PollInterval > 0 {
		o.PollInterval = pooler.PollInterval
	}
	if o.Logger == nil {
		o.Logger = c.Logger
	}
	if !c.SkipMigrate {
		if err := outbox.Migrate(ctx, pool, &o); err != nil {
			return fmt.Errorf("migrating the outbox tables in schema %q (or set %s=false and run txmq migrate): %w", c.Schema, EnvMigrate, err)
		}
	}
	store, err := outbox.New(pool, &o)
	if err != nil {
		return err
	}
	a.Store = store
	if err := store.Start(ctx); err != nil {
		return core.RedactError(fmt.Errorf("%s %s: starting the outbox relay of schema %q (it holds one connection for LISTEN, of the pool or of txmq_listen_url; check the database and its connection limit): %w",
			EnvDatabaseURL, core.Redact(c.DatabaseURL), c.Schema, err), c.DatabaseURL)
	}
	return nil
}

// openLedger migrates (unless SkipMigrate) and starts the ledger in the app's schema.
func (a *App) openLedger(ctx context.Context, c *Config) error {
	o := *c.Ledger
	o.Schema = c.Schema
	if o.Mode && o.Horizon == 0 {
		o.Horizon = ledger.HorizonFor(c.Node.Lease)
	}
	if o.Logger == nil {
		o.Logger = c.Logger
	}
	if !c.SkipMigrate {
		if err := ledger.Migrate(ctx, a.Pool, &o); err != nil {
			return fmt.Errorf("migrating the ledger table in schema %q (or set %s=false and run txmq migrate): %w", c.Schema, EnvMigrate, err)
		}
	}
	l, err := ledger.New(a.Pool, &o)
	if err != nil {
		return err
	}
	a.Ledger = l
	return nil
}

// Close stops the app in order: the node (stops fetching, flushes its publish buffer to the
// backend or the outbox, waits for running listeners until ctx is done), then the ledger
// (its last grouped write), then the outbox store (its relay and sweep), then the backend,
// then the pool. It returns every error met.
// Closing twice is safe.
func (a *App) Close(ctx context.Context) error {
	a.closeOnce.Do(func() {
		var errs []error
		if a.Node != nil {
			errs = append(errs, a.Node.Close(ctx))
		}
		if a.Ledger != nil {
			errs = append(errs, a.Ledger.Close(context.WithoutCancel(ctx)))
		}
		if a.Store != nil {
			errs = append(errs, a.Store.Close(ctx))
		}
		if a.Backend != nil {
			errs = append(errs, a.Backend.Close())
		}
		if a.Pool != nil {
			a.Pool.Close()
		}
		if a.closeDB != nil {
			errs = append(errs, a.closeDB())
		}
		a.closeErr = errors.Join(errs...)
	})
	return a.closeErr
}

func redactAll(urls []string) []string {
	out := make([]string, len(urls))
	for i, u := range urls {
		out[i] = core.Redact(u)
	}
	return out
}

package txmq

import (
	"fmt"
	"log/slog"
	"net/url"
	"os"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/schemaset"
	"github.com/txmq/txmq/ledger"
	"github.com/txmq/txmq/outbox"
)

// The environment variables ConfigFromEnv reads.
const (
	// EnvBackend is the backend URL (memory://, postgres://..., redis://..., sqs://...,
	// nats://...). Default memory://.
	EnvBackend = "TXMQ_BACKEND"
	// EnvDatabaseURL is the app database (PostgreSQL) holding the outbox and dead letters.
	// Optional.
	EnvDatabaseURL = "TXMQ_DATABASE_URL"
	// EnvDrainBackends lists the old backend URLs to drain after a swap, comma-separated.
	EnvDrainBackends = "TXMQ_DRAIN_BACKENDS"
	// EnvSchema is the schema of every txmq table of the app: the outbox and dead letters in
	// the app database and, on a postgres:// backend, the jobs table. Default: the backend
	// URL's txmq_schema parameter, else "txmq"; a different txmq_schema is an error.
	EnvSchema = "TXMQ_SCHEMA"
	// EnvMigrate says whether Open migrates the outbox tables (true or false). Default true.
	EnvMigrate = "TXMQ_MIGRATE"
	// EnvDrainCheckInterval is how often an old backend's depths are checked (a Go duration).
	// Default 5s.
	EnvDrainCheckInterval = "TXMQ_DRAIN_CHECK_INTERVAL"
	// EnvDrainRecheckInterval is how often a drained old backend is checked again for batches
	// that nodes still on the old setting published there (a Go duration). Default 30s.
	EnvDrainRecheckInterval = "TXMQ_DRAIN_RECHECK_INTERVAL"
)

// settings are the accepted variables, in the order error messages list them.
var settings = []string{EnvBackend, EnvDatabaseURL, EnvDrainBackends, EnvSchema, EnvMigrate, EnvDrainCheckInterval, EnvDrainRecheckInterval}

// DefaultBackend is the backend URL used when none is set: the in-process memory backend.
const DefaultBackend = "memory://"

// Config says where an app's queues live. The zero value (or Open with a nil Config reading
// the environment with nothing set) is the memory backend without an app database.
type Config struct {
	// Backend is the backend URL, for example redis://127.0.0.1:6379/0 or
	// postgres://app@db/app?txmq_schema=jobs. Default DefaultBackend (memory://).
	Backend string
	// DatabaseURL is the app's PostgreSQL database. When set, Open creates the outbox Store
	// there (migrating its tables unless SkipMigrate), starts its relay and recovery sweep,
	// and gives it to the node as Handoff and DeadLetters. Empty: no outbox, no dead-letter
	// table. Behind PgBouncer in transaction pooling mode add txmq_pgbouncer=true (and
	// optionally txmq_listen_url, a direct query-escaped postgres:// URL of the server for
	// the relay's LISTEN connection, and txmq_poll_interval): see outbox.Options.PgBouncer.
	DatabaseURL string
	// Drain lists old backend URLs to keep consuming from until they are empty, after the
	// Backend setting changed (see package drain). Publishing goes to Backend only.
	Drain []string
	// Schema holds every txmq table of the app: the outbox and dead-letter tables and, when
	// Backend is a postgres:// URL, its jobs table (Open adds txmq_schema=Schema to a
	// postgres:// Backend or Drain URL that does not name one). Default: the Backend URL's
	// txmq_schema parameter when it is a postgres:// URL, else outbox.DefaultSchema ("txmq").
	// A Backend URL whose txmq_schema differs from Schema is an error naming both; an old
	// backend in Drain may name its own txmq_schema.
	Schema string
	// SkipMigrate stops Open from creating or upgrading the outbox tables (run txmq migrate
	// instead).
	SkipMigrate bool
	// DrainCheckInterval is drain.Options.CheckInterval. Default 5 s.
	DrainCheckInterval time.Duration
	// DrainRecheckInterval is drain.Options.RecheckInterval. Default 30 s.
	DrainRecheckInterval time.Duration
	// Logger receives the logs of everything Open creates (unless Node.Logger or
	// Outbox.Logger is set). Default slog.Default().
	Logger *slog.Logger
	// Node passes options to NewNode. Open sets Backend, and Handoff and DeadLetters
	// when a database is configured and they are not set.
	Node NodeOptions
	// Outbox passes options to outbox.New. Open sets Schema (from Schema) and Backend.
	Outbox outbox.Options
	// Ledger turns the message ledger on (package ledger): a table in the app database
	// recording every message's publish and outcome, so that App.Inspector (and txmq msg) can
	// look any message up, list messages and cancel them on every backend. It needs
	// DatabaseURL; Open migrates its table with the outbox's (unless SkipMigrate), sets Schema
	// from Schema, and gives the ledger to the node (NodeOptions.Ledger). Its fields are
	// ledger.Options (retention of completed entries, default 24 h; grouped-write period,
	// default 100 ms). With Mode set (ledger mode) Open also gives the outbox a backend that
	// keeps what it publishes (ledger.Ledger.Keeping) and, when Horizon is 0, sets it to
	// ledger.HorizonFor(Node.Lease). Default nil: no ledger.
	Ledger *ledger.Options
}

// ConfigFromEnv returns the Config the environment describes (TXMQ_BACKEND,
// TXMQ_DATABASE_URL, TXMQ_DRAIN_BACKENDS, TXMQ_SCHEMA, TXMQ_MIGRATE,
// TXMQ_DRAIN_CHECK_INTERVAL, TXMQ_DRAIN_RECHECK_INTERVAL), with every value checked: a URL that does not parse, a scheme no
// imported adapter registered, a bad schema name or boolean is an error naming the variable
// and what to do. Other TXMQ_ variables are left alone (tools and tests have their own), except
// ones that look like a misspelt setting (TXMQ_DRAIN_BACKEND, TXMQ_DATABASE): those are errors
// naming the setting meant, so a typo never silently falls back to a default.
func ConfigFromEnv() (*Config, error) { return configFromEnviron(os.Environ()) }

func configFromEnviron(environ []string) (*Config, error) {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		if !strings.HasPrefix(k, "TXMQ_") {
			continue
		}
		env[k] = v
		if isSetting(k) {
			continue
		}
		if meant := misspelt(k); meant != "" {
			return nil, fmt.Errorf("%w: environment variable %s is not a txmq setting; did you mean %s? (settings: %s)", core.ErrInvalidConfig, k, meant, strings.Join(settings, ", "))
		}
	}
	cfg := &Config{
		Backend:     strings.TrimSpace(env[EnvBackend]),
		DatabaseURL: strings.TrimSpace(env[EnvDatabaseURL]),
		Schema:      strings.TrimSpace(env[EnvSchema]),
	}
	if cfg.Backend == "" {
		cfg.Backend = DefaultBackend
	}
	for _, u := range strings.Split(env[EnvDrainBackends], ",") {
		if u = strings.TrimSpace(u); u != "" {
			cfg.Drain = append(cfg.Drain, u)
		}
	}
	if v := strings.TrimSpace(env[EnvMigrate]); v != "" {
		m, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("%w: %s=%q: use true or false", core.ErrInvalidConfig, EnvMigrate, v)
		}
		cfg.SkipMigrate = !m
	}
	for _, s := range []struct {
		name string
		to   *time.Duration
	}{{EnvDrainCheckInterval, &cfg.DrainCheckInterval}, {EnvDrainRecheckInterval, &cfg.DrainRecheckInterval}} {
		if v := strings.TrimSpace(env[s.name]); v != "" {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("%w: %s=%q: use a positive Go duration such as 5s", core.ErrInvalidConfig, s.name, v)
			}
			*s.to = d
		}
	}
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	return cfg, nil
}

var schemaRe = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,49}$`)

// Validate checks the Config without connecting anywhere: the backend and drain URLs parse and
// name registered schemes, the database URL parses, the schema is a valid name. Errors wrap
// core.ErrInvalidConfig, name the setting and never contain a password.
func (c *Config) Validate() error {
	backend := c.Backend
	if backend == "" {
		backend = DefaultBackend
	}
	if err := checkBackendURL(EnvBackend, backend); err != nil {
		return err
	}
	seen := map[string]bool{core.Redact(backend): true}
	for i, u := range c.Drain {
		name := fmt.Sprintf("%s (entry %d)", EnvDrainBackends, i+1)
		if err := checkBackendURL(name, u); err != nil {
			return err
		}
		if r := core.Redact(u); seen[r] {
			return fmt.Errorf("%w: %s: %s is listed twice or is also %s; name each old backend once and never the current one", core.ErrInvalidConfig, name, r, EnvBackend)
		} else {
			seen[r] = true
		}
	}
	if c.DatabaseURL != "" {
		if err := checkDatabaseScheme(c.DatabaseURL); err != nil {
			return err
		}
		if _, other := otherDatabase(c.DatabaseURL); !other {
			if _, _, err := databaseConfig(c.DatabaseURL); err != nil {
				return err
			}
		}
	}
	if c.Schema != "" && !schemaRe.MatchString(c.Schema) {
		return fmt.Errorf("%w: %s=%q: use letters, digits and _ (at most 50, not starting with a digit)", core.ErrInvalidConfig, EnvSchema, c.Schema)
	}
	if _, _, err := c.resolveSchema(); err != nil {
		return err
	}
	return nil
}

// resolveSchema returns the one schema of the app's txmq tables and the Backend URL to open
// (a postgres:// URL with txmq_schema set to it); see Config.Schema.
func (c *Config) resolveSchema() (schema, backend string, err error) {
	backend = c.Backend
	if backend == "" {
		backend = DefaultBackend
	}
	schema, backend, err = schemaset.Resolve(c.Schema, backend, schemaset.Names{Schema: EnvSchema, Backend: EnvBackend})
	if err != nil {
		return "", "", core.RedactError(err, c.Backend)
	}
	return schema, backend, nil
}

func checkBackendURL(setting, raw string) error {
	u, err := url.Parse(raw)
	if err != nil || u.Scheme == "" || !strings.Contains(raw, "://") && !slices.Contains(core.Schemes(), strings.ToLower(u.Scheme)) {
		return fmt.Errorf("%w: %s %s is not a backend URL; use scheme://..., one of: %s", core.ErrInvalidConfig, setting, core.Redact(raw), schemeList())
	}
	for _, s := range core.Schemes() {
		if s == strings.ToLower(u.Scheme) {
			return nil
		}
	}
	return fmt.Errorf("%w: %s %s: unknown scheme %q; registered schemes: %s", core.ErrInvalidConfig, setting, core.Redact(raw), u.Scheme, schemeList())
}

func schemeList() string {
	out := make([]string, 0, len(core.Schemes()))
	for _, s := range core.Schemes() {
		out = append(out, s+"://")
	}
	return strings.Join(out, ", ")
}

func isSetting(k string) bool {
	for _, s := range settings {
		if s == k {
			return true
		}
	}
	return false
}

// misspelt returns the setting k looks like a typo of (at most 2 edits away, or a prefix of
// it), or "".
func misspelt(k string) string {
	var cands []string
	for _, s := range settings {
		if editDistance(k, s) <= 2 || (len(k) > len("TXMQ_")+3 && strings.HasPrefix(s, k)) {
			cands = append(cands, s)
		}
	}
	sort.Strings(cands)
	return strings.Join(cands, " or ")
}

func editDistance(a, b string) int {
	prev := make([]int, len(b)+1)
	cur := make([]int, len(b)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(a); i++ {
		cur[0] = i
		for j := 1; j <= len(b); j++ {
			cost := 1
			if a[i-1] == b[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
		}
		prev, cur = cur, prev
	}
	return prev[len(b)]
}

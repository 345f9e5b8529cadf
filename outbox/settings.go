package outbox

import (
	"fmt"
	"net/url"
	"strings"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/internal/pgpooler"
	"github.com/txmq/txmq/internal/schemaset"
)

// SchemaSettingNames say how a caller's settings are spelt in ResolveSchema's errors (for
// example "TXMQ_SCHEMA" or "--schema").
type SchemaSettingNames struct {
	// Schema names the schema setting.
	Schema string
	// Backend names the backend URL setting.
	Backend string
}

// ResolveSchema returns the one schema of every txmq table of an app (outbox, dead letters,
// ledger and, on a postgres:// backend, the jobs table) for the schema setting (may be empty)
// and the backend URL (may be empty), as txmq.Open resolves TXMQ_SCHEMA and TXMQ_BACKEND, and
// the backend URL to open: a postgres:// URL without txmq_schema gets the resolved schema
// added; other URLs are returned unchanged. The schema setting and a postgres URL's
// txmq_schema must agree when both are set (a conflict is an error wrapping
// core.ErrInvalidConfig that names both settings); neither means DefaultSchema. Tools that
// read an app's tables (the txmq command) call it so that the same settings find the same
// tables.
func ResolveSchema(schema, backendURL string, names SchemaSettingNames) (resolved, backend string, err error) {
	return schemaset.Resolve(schema, backendURL, schemaset.Names{Schema: names.Schema, Backend: names.Backend})
}

// DrainBackendURL returns an old backend URL (one being drained, TXMQ_DRAIN_BACKENDS) to open
// for the app's resolved schema: a postgres URL naming its own txmq_schema keeps it (an old
// backend may live elsewhere), one without gets schema, as the app's own backend URL would.
// Other URLs are returned unchanged.
func DrainBackendURL(schema, raw string) string { return schemaset.ForDrain(schema, raw) }

// TakeURLSettings reads an app database URL as txmq.Open reads TXMQ_DATABASE_URL: its
// txmq_pgbouncer, txmq_listen_url and txmq_poll_interval parameters are removed and set
// o.PgBouncer, o.ListenURL and o.PollInterval (o may be nil to drop them), txmq_pgbouncer=true
// also adds pgx's default_query_exec_mode=exec unless the URL names a mode, and the rest is
// returned for pgxpool.New. A keyword/value string (host=... dbname=...) and a URL that does
// not parse are returned as they are (pgx reports the latter). setting names the URL's setting
// in errors ("TXMQ_DATABASE_URL"); errors wrap core.ErrInvalidConfig and never show the
// password.
func TakeURLSettings(raw, setting string, o *Options) (string, error) {
	lower := strings.ToLower(raw)
	if !strings.HasPrefix(lower, "postgres://") && !strings.HasPrefix(lower, "postgresql://") {
		return raw, nil
	}
	u, err := url.Parse(raw)
	if err != nil {
		return raw, nil
	}
	q := u.Query()
	s, err := pgpooler.Take(setting, q)
	if err != nil {
		return "", core.RedactError(fmt.Errorf("txmq outbox: %w", err), raw)
	}
	u.RawQuery = q.Encode()
	if o != nil {
		o.PgBouncer, o.ListenURL, o.PollInterval = s.PgBouncer, s.ListenURL, s.PollInterval
	}
	return u.String(), nil
}

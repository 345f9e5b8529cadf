package sqljobs

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity/urlfuzz"
	"github.com/txmq/txmq/txmqtest/testenv"
)

func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, url   string
		wantErr     string // substring; empty means success
		wantSchema  string
		wantMigrate bool
		wantRest    string // query left for pgx
		check       func(t *testing.T, o *Options)
	}{
		{name: "defaults", url: "postgres://u@h/db?sslmode=disable", wantMigrate: true, wantRest: "sslmode=disable"},
		{name: "schema and migrate", url: "postgresql://u@h/db?txmq_schema=jobs&txmq_migrate=false&pool_max_conns=4", wantSchema: "jobs", wantRest: "pool_max_conns=4"},
		{name: "durations", url: "postgres://h/db?txmq_lease=5s&txmq_query_timeout=2s&txmq_abandoned_after=48h&txmq_reap_interval=-1s&txmq_fetch_limit=7", wantMigrate: true, check: func(t *testing.T, o *Options) {
			// txmq_lease and txmq_fetch_limit are accepted and ignored.
			if o.QueryTimeout != 2*time.Second || o.AbandonedAfter != 48*time.Hour || o.ReapInterval != -time.Second {
				t.Fatalf("options = %+v", o)
			}
		}},
		{name: "unknown txmq param", url: "postgres://h/db?txmq_bogus=1", wantErr: `unknown parameter "txmq_bogus"; accepted txmq_ parameters: txmq_abandoned_after, txmq_fetch_limit, txmq_lease, txmq_listen_url, txmq_migrate`},
		{name: "bad migrate", url: "postgres://h/db?txmq_migrate=maybe", wantErr: "txmq_migrate"},
		{name: "bad lease", url: "postgres://h/db?txmq_lease=-1s", wantErr: "txmq_lease"},
		{name: "bad duration", url: "postgres://h/db?txmq_query_timeout=soon", wantErr: "txmq_query_timeout"},
		{name: "bad fetch limit", url: "postgres://h/db?txmq_fetch_limit=0", wantErr: "txmq_fetch_limit"},
		{name: "bad schema", url: "postgres://h/db?txmq_schema=no-dashes", wantErr: "Options.Schema"},
		{name: "pgbouncer", url: "postgres://h/db?txmq_pgbouncer=true", wantMigrate: true, wantRest: "default_query_exec_mode=exec", check: func(t *testing.T, o *Options) {
			if !o.PgBouncer || o.ListenURL != "" || !o.polls() {
				t.Fatalf("options = %+v; want PgBouncer polling", o)
			}
		}},
		{name: "pgbouncer with listen url", url: "postgres://h:6432/db?txmq_pgbouncer=true&default_query_exec_mode=cache_describe&txmq_poll_interval=1s&txmq_listen_url=" + url.QueryEscape("postgres://u:pw@h:5432/db"), wantMigrate: true, wantRest: "default_query_exec_mode=cache_describe", check: func(t *testing.T, o *Options) {
			if !o.PgBouncer || o.ListenURL != "postgres://u:pw@h:5432/db" || o.polls() || o.PollInterval != time.Second {
				t.Fatalf("options = %+v; want PgBouncer with a LISTEN URL", o)
			}
		}},
		{name: "pgbouncer describe_exec", url: "postgres://h/db?txmq_pgbouncer=true&default_query_exec_mode=describe_exec", wantErr: "cannot work through PgBouncer"},
		{name: "bad listen url", url: "postgres://h/db?txmq_listen_url=h:5432", wantErr: "txmq_listen_url"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			o, migrate, rest, err := parseURL(u)
			if tc.wantErr != "" {
				if err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("err = %v; want ErrInvalidConfig mentioning %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if o.Schema != tc.wantSchema || migrate != tc.wantMigrate {
				t.Fatalf("schema %q migrate %v; want %q %v", o.Schema, migrate, tc.wantSchema, tc.wantMigrate)
			}
			if strings.Contains(rest.RawQuery, "txmq_") || (tc.wantRest != "" && rest.RawQuery != tc.wantRest) {
				t.Fatalf("query for pgx = %q, want %q", rest.RawQuery, tc.wantRest)
			}
			if tc.check != nil {
				tc.check(t, o)
			}
		})
	}
}

func TestOpenBackendURL(t *testing.T) {
	t.Parallel()
	raw := testenv.PostgresURL(t)
	admin := testenv.PostgresPool(t)
	schema := testenv.PostgresSchema(t, admin)
	ctx := ctxT(t)

	// txmq_migrate=false on a fresh schema: New reports the missing tables.
	_, err := core.OpenBackend(ctx, testenv.WithParams(t, raw, "txmq_schema", schema, "txmq_migrate", "false"))
	if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "Migrate") {
		t.Fatalf("open without migrating: %v", err)
	}
	for _, scheme := range []string{"postgres", "postgresql"} {
		u, _ := url.Parse(testenv.WithParams(t, raw, "txmq_schema", schema, "txmq_reap_interval", "-1s"))
		u.Scheme = scheme
		b, err := core.OpenBackend(ctx, u.String())
		if err != nil {
			t.Fatalf("open %s: %v", scheme, err)
		}
		be := b.(*Backend)
		if be.Schema() != schema {
			t.Fatalf("schema %q", be.Schema())
		}
		publish(t, be, "q", scheme, time.Time{})
		if cs := fetch(t, be, 0, all("q")); len(cs) != 1 {
			t.Fatalf("%s: fetched %d", scheme, len(cs))
		}
		_ = b.Close()
		if be.Pool().Ping(context.Background()) == nil {
			t.Fatal("Close must close the pool Open created")
		}
	}
}

// TestURLParamNames: every parameter the URL parser consumes follows the scheme every adapter
// uses (txmq_<snake_case>).
func TestURLParamNames(t *testing.T) {
	t.Parallel()
	urlfuzz.CheckParamNames(t, urlParams, nil)
}

package mysql

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestParseURL: a mysql:// URL's parts make the driver's connection, txmq_ parameters set
// Options, the rest are driver parameters, and bad input is an ErrInvalidConfig naming the
// parameter without the password.
func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		url     string
		check   func(t *testing.T, o *Options, migrate bool, addr, user, pass, db string, params map[string]string)
		wantErr string
	}{
		{name: "defaults", url: "mysql://app:s3cret@db.example/shop", check: func(t *testing.T, o *Options, migrate bool, addr, user, pass, db string, _ map[string]string) {
			if addr != "db.example:3306" || user != "app" || pass != "s3cret" || db != "shop" || !migrate || o.Schema != "" {
				t.Errorf("got addr %s user %s pass %s db %s migrate %v schema %q", addr, user, pass, db, migrate, o.Schema)
			}
		}},
		{name: "txmq parameters", url: "mariadb://root@127.0.0.1:3307/test?txmq_schema=jobs&txmq_migrate=false&TXMQ_POLL_INTERVAL=50ms&txmq_query_timeout=2s&txmq_reap_interval=-1s&txmq_lease=30s&txmq_fetch_limit=10&txmq_abandoned_after=1h",
			check: func(t *testing.T, o *Options, migrate bool, addr, _, _, _ string, params map[string]string) {
				if addr != "127.0.0.1:3307" || o.Schema != "jobs" || migrate || o.PollInterval != 50*time.Millisecond || o.QueryTimeout != 2*time.Second || o.ReapInterval != -time.Second || o.AbandonedAfter != time.Hour {
					t.Errorf("got addr %s options %+v migrate %v", addr, o, migrate)
				}
				if len(params) != 1 || params[lockWaitVar] != "1" {
					t.Errorf("driver params = %v; want only %s=1 (half of txmq_query_timeout): txmq_ parameters must not reach the driver", params, lockWaitVar)
				}
			}},
		{name: "driver parameters pass", url: "mysql://u@h/d?readTimeout=5s&sql_mode=%27STRICT_ALL_TABLES%27", check: func(t *testing.T, _ *Options, _ bool, _, _, _, _ string, params map[string]string) {
			if params["sql_mode"] != "'STRICT_ALL_TABLES'" {
				t.Errorf("driver params = %v", params)
			}
		}},
		{name: "unknown txmq parameter", url: "mysql://u:pw@h/d?txmq_shema=x", wantErr: `unknown parameter "txmq_shema"`},
		{name: "bad duration", url: "mysql://u:pw@h/d?txmq_poll_interval=soon", wantErr: `txmq_poll_interval="soon"`},
		{name: "negative poll", url: "mysql://u:pw@h/d?txmq_poll_interval=-1s", wantErr: "must be positive"},
		{name: "bad migrate", url: "mysql://u:pw@h/d?txmq_migrate=maybe", wantErr: "use true or false"},
		{name: "bad schema", url: "mysql://u:pw@h/d?txmq_schema=a-b", wantErr: "Options.Schema"},
		{name: "no host", url: "mysql:///d", wantErr: "names no host"},
		{name: "no database", url: "mysql://u:pw@h", wantErr: "names no database"},
		{name: "two path segments", url: "mysql://u:pw@h/a/b", wantErr: "one database name"},
		{name: "bad driver parameter", url: "mysql://u:pw@h/d?readTimeout=soon", wantErr: "driver parameter"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			o, migrate, cfg, err := parseConfig(u)
			if tc.wantErr != "" {
				if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) || strings.Contains(err.Error(), "pw@") {
					t.Fatalf("parseConfig(%s) = %v; want ErrInvalidConfig containing %q, no password", tc.url, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseConfig(%s): %v", tc.url, err)
			}
			tc.check(t, o, migrate, cfg.Addr, cfg.User, cfg.Passwd, cfg.DBName, cfg.Params)
		})
	}
}

// TestSchemesRegistered: importing the package registers mysql:// and mariadb://.
func TestSchemesRegistered(t *testing.T) {
	t.Parallel()
	for _, s := range Schemes {
		found := false
		for _, r := range core.Schemes() {
			found = found || r == s
		}
		if !found {
			t.Errorf("scheme %s not registered: %v", s, core.Schemes())
		}
	}
}

// TestOpenURL: a backend opened by URL migrates its database and works; a URL whose server
// does not answer fails with ErrBackendUnavailable, without the password.
func TestOpenURL(t *testing.T) {
	t.Parallel()
	w := newWorld(t) // a database to hold the schema
	u := *w.u
	q := u.Query()
	q.Set("txmq_schema", w.schema+"_url")
	u.RawQuery = q.Encode()
	t.Cleanup(func() { _, _ = w.admin.Exec("DROP DATABASE IF EXISTS " + quoteIdent(w.schema+"_url")) })
	be, err := core.OpenBackend(t.Context(), u.String())
	if err != nil {
		t.Fatalf("OpenBackend: %v", err)
	}
	t.Cleanup(func() { _ = be.Close() })
	if err := be.Publish(t.Context(), core.OutgoingBatch{ID: "b", Queue: "q", Body: []byte("x"), Messages: 1}); err != nil {
		t.Fatal(err)
	}
	if d, err := be.Depths(t.Context(), []string{"q"}); err != nil || d["q"].Ready != 1 {
		t.Fatalf("depths = %v, %v", d, err)
	}

	_, err = core.OpenBackend(t.Context(), "mysql://u:hunter2@127.0.0.1:1/d?timeout=1s")
	if !errors.Is(err, core.ErrBackendUnavailable) || strings.Contains(err.Error(), "hunter2") {
		t.Fatalf("OpenBackend of a closed port = %v; want ErrBackendUnavailable without the password", err)
	}
}

// TestLockWaitBelowQueryTimeout: the connections of a mysql:// URL end a lock wait on the
// server at half of QueryTimeout (a statement the caller gave up on must not hold its locks
// for the server's 50 s), unless the URL sets innodb_lock_wait_timeout itself.
func TestLockWaitBelowQueryTimeout(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		name, query string
		want        int
	}{
		{"default", "", 5},
		{"query timeout 4s", "txmq_query_timeout=4s", 2},
		{"query timeout 1s", "txmq_query_timeout=1s", 1},
		{"set by the URL", "innodb_lock_wait_timeout=30", 30},
	} {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			u := *mysqlURL(t)
			q := u.Query()
			for k, v := range must(url.ParseQuery(c.query)) {
				q[k] = v
			}
			u.RawQuery = q.Encode()
			db := dbAt(t, &u, "")
			var got int
			if err := db.QueryRowContext(t.Context(), "SELECT @@SESSION.innodb_lock_wait_timeout").Scan(&got); err != nil {
				t.Fatal(err)
			}
			if got != c.want {
				t.Fatalf("innodb_lock_wait_timeout of a connection of %s = %d; want %d", u.Redacted(), got, c.want)
			}
		})
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

package sqlite

import (
	"context"
	"errors"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestParseURL: a sqlite:// URL names a file (relative or absolute), txmq_ parameters set
// Options, _ parameters go to the driver, and bad input (no file, an in-memory database, an
// unknown parameter) is an ErrInvalidConfig saying what to write instead.
func TestParseURL(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, url, path string
		check           func(t *testing.T, o *Options, migrate bool, params url.Values)
		wantErr         string
	}{
		{name: "relative", url: "sqlite://app.db", path: "app.db"},
		{name: "relative dir", url: "sqlite://data/jobs/app.db", path: "data/jobs/app.db"},
		{name: "dot relative", url: "sqlite://./app.db", path: "./app.db"},
		{name: "absolute", url: "sqlite:///var/lib/app/jobs.db", path: "/var/lib/app/jobs.db"},
		{name: "opaque", url: "sqlite:app.db", path: "app.db"},
		{name: "sqlite3 scheme", url: "sqlite3:///tmp/x.db", path: "/tmp/x.db"},
		{name: "txmq parameters", url: "sqlite://a.db?txmq_migrate=false&TXMQ_POLL_INTERVAL=50ms&txmq_query_timeout=2s&txmq_busy_timeout=1500ms&txmq_reap_interval=-1s&txmq_lease=30s&txmq_fetch_limit=10&txmq_abandoned_after=1h", path: "a.db",
			check: func(t *testing.T, o *Options, migrate bool, params url.Values) {
				if migrate || o.PollInterval != 50*time.Millisecond || o.QueryTimeout != 2*time.Second || o.BusyTimeout != 1500*time.Millisecond || o.ReapInterval != -time.Second || o.AbandonedAfter != time.Hour {
					t.Errorf("options %+v migrate %v", o, migrate)
				}
				if len(params) != 0 {
					t.Errorf("txmq_ parameters reached the driver: %v", params)
				}
			}},
		{name: "driver parameters pass", url: "sqlite://a.db?_pragma=synchronous(NORMAL)", path: "a.db", check: func(t *testing.T, _ *Options, _ bool, params url.Values) {
			if params.Get("_pragma") != "synchronous(NORMAL)" {
				t.Errorf("driver params = %v", params)
			}
		}},
		{name: "no file", url: "sqlite://", wantErr: "names no file"},
		{name: "memory", url: "sqlite://:memory:", wantErr: "neither durable nor shared"},
		{name: "opaque memory", url: "sqlite::memory:", wantErr: "neither durable nor shared"},
		{name: "uri memory", url: "sqlite:file::memory:?cache=shared", wantErr: "neither durable nor shared"},
		{name: "mode memory", url: "sqlite://a.db?mode=memory", wantErr: `parameter "mode"`},
		{name: "unknown txmq parameter", url: "sqlite://a.db?txmq_shema=x", wantErr: `unknown parameter "txmq_shema"`},
		{name: "schema", url: "sqlite://a.db?txmq_schema=x", wantErr: "no schemas"},
		{name: "bad busy timeout", url: "sqlite://a.db?txmq_busy_timeout=soon", wantErr: "txmq_busy_timeout"},
		{name: "bad duration", url: "sqlite://a.db?txmq_poll_interval=soon", wantErr: `txmq_poll_interval="soon"`},
		{name: "user", url: "sqlite://u:pw@a.db", wantErr: "has a user or password"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			u, err := url.Parse(tc.url)
			if err != nil {
				t.Fatal(err)
			}
			path, o, migrate, params, err := parseURL(u)
			if tc.wantErr != "" {
				if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("parseURL(%s) = %v; want ErrInvalidConfig containing %q", tc.url, err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "pw") {
					t.Fatalf("the error shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("parseURL(%s): %v", tc.url, err)
			}
			if path != tc.path {
				t.Errorf("path = %q; want %q", path, tc.path)
			}
			if tc.check != nil {
				tc.check(t, o, migrate, params)
			}
		})
	}
}

// TestOpenURL: core.OpenBackend opens a sqlite:// URL (the scheme is registered), migrates a
// new file and works; a second Open of the same file shares its batches.
func TestOpenURL(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "open.db")
	ctx := context.Background()
	open := func() core.Backend {
		be, err := core.OpenBackend(ctx, "sqlite://"+path+"?txmq_reap_interval=-1s")
		if err != nil {
			t.Fatalf("OpenBackend: %v", err)
		}
		t.Cleanup(func() { _ = be.Close() })
		return be
	}
	a, b := open(), open()
	if err := a.Publish(ctx, core.OutgoingBatch{ID: "x", Queue: "q", Body: []byte("hi"), Messages: 1}); err != nil {
		t.Fatal(err)
	}
	cs, err := b.Fetch(ctx, core.FetchRequest{Node: "n", Queues: []core.QueueSlots{all("q")}, Lease: time.Second})
	if err != nil || len(cs) != 1 || string(cs[0].Body) != "hi" {
		t.Fatalf("Fetch through the second handle = %v, %v", cs, err)
	}
}

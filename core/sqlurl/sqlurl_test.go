package sqlurl

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestTakeSettingsAndErrors(t *testing.T) {
	t.Parallel()
	accepted := map[string]string{"txmq_schema": "", "txmq_own": ""}
	cases := []struct {
		name, query string
		want        Settings
		rest        string
		err         string
	}{
		{name: "none", query: "sslmode=disable", want: Settings{Migrate: true}, rest: "sslmode=disable"},
		{name: "all", query: "TXMQ_SCHEMA=jobs&txmq_migrate=false&txmq_lease=1m&txmq_fetch_limit=3&txmq_query_timeout=2s&txmq_abandoned_after=1h&txmq_reap_interval=-1s&txmq_poll_interval=50ms&tls=true",
			want: Settings{Schema: "jobs", QueryTimeout: 2 * time.Second, AbandonedAfter: time.Hour, ReapInterval: -time.Second, PollInterval: 50 * time.Millisecond},
			rest: "tls=true"},
		{name: "last value wins", query: "txmq_schema=a&txmq_schema=b", want: Settings{Schema: "b", Migrate: true}},
		{name: "bad migrate", query: "txmq_migrate=maybe", err: "txmq_migrate=\"maybe\": use true or false"},
		{name: "zero duration", query: "txmq_query_timeout=0s", err: "must be positive"},
		{name: "negative lease", query: "txmq_lease=-1s", err: "txmq_lease=\"-1s\": must be positive"},
		{name: "not a duration", query: "txmq_abandoned_after=soon", err: "txmq_abandoned_after"},
		{name: "bad fetch limit", query: "txmq_fetch_limit=0", err: "txmq_fetch_limit=\"0\""},
		{name: "unknown", query: "txmq_nope=1", err: "unknown parameter \"txmq_nope\"; accepted txmq_ parameters: txmq_own, txmq_schema"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			q, err := url.ParseQuery(tc.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Take("testdb", q, accepted)
			if tc.err != "" {
				if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.err) || !strings.HasPrefix(err.Error(), core.ErrInvalidConfig.Error()+": testdb: ") {
					t.Fatalf("Take(%q) error = %v, want ErrInvalidConfig naming %q", tc.query, err, tc.err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Take(%q): %v", tc.query, err)
			}
			if got != tc.want {
				t.Errorf("Take(%q) = %+v, want %+v", tc.query, got, tc.want)
			}
			if q.Encode() != tc.rest {
				t.Errorf("Take(%q) left %q, want %q", tc.query, q.Encode(), tc.rest)
			}
		})
	}
}

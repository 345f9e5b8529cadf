package pgpooler

import (
	"errors"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestTake(t *testing.T) {
	t.Parallel()
	listen := url.QueryEscape("postgres://u:secret@db:5432/app")
	tests := []struct {
		name     string
		query    string
		want     Settings
		wantRest string
		wantErr  string
	}{
		{name: "none", query: "sslmode=disable", wantRest: "sslmode=disable"},
		{name: "pgbouncer sets exec mode", query: "txmq_pgbouncer=true&sslmode=disable", want: Settings{PgBouncer: true}, wantRest: "default_query_exec_mode=exec&sslmode=disable"},
		{name: "explicit compatible mode kept", query: "TXMQ_PGBOUNCER=1&default_query_exec_mode=simple_protocol", want: Settings{PgBouncer: true}, wantRest: "default_query_exec_mode=simple_protocol"},
		{name: "false leaves the mode", query: "txmq_pgbouncer=false", wantRest: ""},
		{name: "listen url and poll", query: "txmq_pgbouncer=true&txmq_listen_url=" + listen + "&txmq_poll_interval=50ms", want: Settings{PgBouncer: true, ListenURL: "postgres://u:secret@db:5432/app", PollInterval: 50 * time.Millisecond}, wantRest: "default_query_exec_mode=exec"},
		{name: "describe_exec refused", query: "txmq_pgbouncer=true&default_query_exec_mode=describe_exec", wantErr: "describe_exec cannot work through PgBouncer"},
		{name: "bad bool", query: "txmq_pgbouncer=yes", wantErr: "use true or false"},
		{name: "bad poll", query: "txmq_poll_interval=-1s", wantErr: "txmq_poll_interval"},
		{name: "listen url not postgres, password redacted", query: "txmq_listen_url=" + url.QueryEscape("mysql://u:secret@db/x"), wantErr: "want a postgres:// URL"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			q, err := url.ParseQuery(tt.query)
			if err != nil {
				t.Fatal(err)
			}
			got, err := Take("test URL", q)
			if tt.wantErr != "" {
				if err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) || strings.Contains(err.Error(), "secret") {
					t.Fatalf("Take(%q) error = %v; want ErrInvalidConfig containing %q, without the password", tt.query, err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Take(%q): %v", tt.query, err)
			}
			if got != tt.want {
				t.Fatalf("Take(%q) = %+v; want %+v", tt.query, got, tt.want)
			}
			if rest := q.Encode(); rest != tt.wantRest {
				t.Fatalf("Take(%q) left %q; want %q", tt.query, rest, tt.wantRest)
			}
		})
	}
}

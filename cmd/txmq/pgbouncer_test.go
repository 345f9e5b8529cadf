package main

import (
	"strings"
	"testing"

	"github.com/txmq/txmq/outbox"
)

func TestDatabaseURLPgBouncer(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		raw, want, wantErr string
		pgbouncer          bool
	}{
		{raw: "postgres://u@h:6432/db?sslmode=disable", want: "postgres://u@h:6432/db?sslmode=disable"},
		{raw: "postgres://u@h:6432/db?txmq_pgbouncer=true", want: "postgres://u@h:6432/db?default_query_exec_mode=exec", pgbouncer: true},
		{raw: "host=h port=6432 dbname=db", want: "host=h port=6432 dbname=db"},
		{raw: "postgres://u:pw@h:6432/db?txmq_pgbouncer=maybe", wantErr: "txmq_pgbouncer"},
	} {
		var o outbox.Options
		got, err := databaseURL(tt.raw, &o)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), "TXMQ_DATABASE_URL") {
				t.Errorf("databaseURL(%q) error = %v; want one naming TXMQ_DATABASE_URL and %s", tt.raw, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got != tt.want || o.PgBouncer != tt.pgbouncer {
			t.Errorf("databaseURL(%q) = %q, %+v, %v; want %q, PgBouncer %v", tt.raw, got, o, err, tt.want, tt.pgbouncer)
		}
	}
}

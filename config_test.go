package txmq

import (
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestConfigFromEnviron(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		env     []string
		want    *Config
		wantErr string // substring; "" means no error
	}{
		{name: "nothing set", env: nil, want: &Config{Backend: "memory://"}},
		{name: "unrelated and tool variables ignored", env: []string{"HOME=/root", "TXMQ_POSTGRES_URL=postgres://x", "TXMQ_REDIS_URL=redis://x", "TXMQ_SERVICES_DIR=/tmp", "TXMQ_PARITY_SUMMARY=/tmp/p"},
			want: &Config{Backend: "memory://"}},
		{name: "everything", env: []string{
			"TXMQ_BACKEND=redis://:secret@127.0.0.1:6379/0",
			"TXMQ_DATABASE_URL=postgres://app:pw@127.0.0.1:5432/app?sslmode=disable",
			"TXMQ_DRAIN_BACKENDS= postgres://app:pw@127.0.0.1/app?txmq_schema=jobs , memory://old ,",
			"TXMQ_SCHEMA=jobs_1", "TXMQ_MIGRATE=false", "TXMQ_DRAIN_CHECK_INTERVAL=250ms", "TXMQ_DRAIN_RECHECK_INTERVAL=10s",
		}, want: &Config{
			Backend:              "redis://:secret@127.0.0.1:6379/0",
			DatabaseURL:          "postgres://app:pw@127.0.0.1:5432/app?sslmode=disable",
			Drain:                []string{"postgres://app:pw@127.0.0.1/app?txmq_schema=jobs", "memory://old"},
			Schema:               "jobs_1",
			SkipMigrate:          true,
			DrainCheckInterval:   250 * time.Millisecond,
			DrainRecheckInterval: 10 * time.Second,
		}},
		{name: "every scheme", env: []string{"TXMQ_DRAIN_BACKENDS=postgresql://h/db,rediss://h:6380,sqs://us-east-1,awssqs://eu-west-1,nats://h:4222"},
			want: &Config{Backend: "memory://", Drain: []string{"postgresql://h/db", "rediss://h:6380", "sqs://us-east-1", "awssqs://eu-west-1", "nats://h:4222"}}},
		{name: "migrate true", env: []string{"TXMQ_MIGRATE=1"}, want: &Config{Backend: "memory://"}},
		{name: "unknown scheme", env: []string{"TXMQ_BACKEND=kafka://h:9092"}, wantErr: `TXMQ_BACKEND kafka://h:9092: unknown scheme "kafka"; registered schemes: `},
		{name: "unknown scheme lists redis", env: []string{"TXMQ_BACKEND=kafka://h:9092"}, wantErr: "redis://"},
		{name: "no scheme", env: []string{"TXMQ_BACKEND=127.0.0.1:6379"}, wantErr: "TXMQ_BACKEND"},
		{name: "unknown drain scheme", env: []string{"TXMQ_DRAIN_BACKENDS=memory://a,amqp://u:hunter2@h"}, wantErr: "TXMQ_DRAIN_BACKENDS (entry 2) amqp://u:xxxxx@h: unknown scheme"},
		{name: "drain equals backend", env: []string{"TXMQ_BACKEND=redis://h", "TXMQ_DRAIN_BACKENDS=redis://h"}, wantErr: "never the current one"},
		{name: "bad database url", env: []string{"TXMQ_DATABASE_URL=postgres://u:hunter2@h:notaport/db"}, wantErr: "TXMQ_DATABASE_URL"},
		{name: "bad database url, password parameter", env: []string{"TXMQ_DATABASE_URL=postgres://u@h:notaport/db?password=hunter2"}, wantErr: "TXMQ_DATABASE_URL"},
		{name: "bad database keyword/value string", env: []string{"TXMQ_DATABASE_URL=host=h port=notaport password=hunter2"}, wantErr: "TXMQ_DATABASE_URL"},
		{name: "bad database keyword/value string, quoted", env: []string{"TXMQ_DATABASE_URL=host=h port=notaport password='hunter2 x'"}, wantErr: "TXMQ_DATABASE_URL"},
		{name: "unknown scheme, password parameter", env: []string{"TXMQ_BACKEND=kafka://h:9092?sasl_password=hunter2"}, wantErr: "unknown scheme"},
		{name: "drain equals backend, password parameter", env: []string{"TXMQ_BACKEND=postgres://u@h/db?password=hunter2", "TXMQ_DRAIN_BACKENDS=postgres://u@h/db?password=hunter2"}, wantErr: "never the current one"},
		{name: "bad schema", env: []string{"TXMQ_SCHEMA=1bad-name"}, wantErr: `TXMQ_SCHEMA="1bad-name"`},
		{name: "bad migrate", env: []string{"TXMQ_MIGRATE=sometimes"}, wantErr: "TXMQ_MIGRATE=\"sometimes\": use true or false"},
		{name: "bad interval", env: []string{"TXMQ_DRAIN_CHECK_INTERVAL=-1s"}, wantErr: "TXMQ_DRAIN_CHECK_INTERVAL"},
		{name: "bad recheck interval", env: []string{"TXMQ_DRAIN_RECHECK_INTERVAL=soon"}, wantErr: "TXMQ_DRAIN_RECHECK_INTERVAL"},
		{name: "typo drain", env: []string{"TXMQ_DRAIN_BACKEND=redis://h"}, wantErr: "TXMQ_DRAIN_BACKEND is not a txmq setting; did you mean TXMQ_DRAIN_BACKENDS?"},
		{name: "typo backend", env: []string{"TXMQ_BAKCEND=redis://h"}, wantErr: "did you mean TXMQ_BACKEND?"},
		{name: "prefix of a setting", env: []string{"TXMQ_DATABASE=postgres://h/db"}, wantErr: "did you mean TXMQ_DATABASE_URL?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := configFromEnviron(tt.env)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("error %v; want one containing %q", err, tt.wantErr)
				}
				if !errors.Is(err, core.ErrInvalidConfig) {
					t.Fatalf("error %v does not wrap core.ErrInvalidConfig", err)
				}
				if strings.Contains(err.Error(), "hunter2") {
					t.Fatalf("error leaks a password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("unexpected error: %v", err)
			}
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("got %+v\nwant %+v", got, tt.want)
			}
		})
	}
}

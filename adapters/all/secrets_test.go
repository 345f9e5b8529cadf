package all_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/txmq/txmq"
	_ "github.com/txmq/txmq/adapters/all" // every backend's URL scheme
	"github.com/txmq/txmq/core"
)

// secretForms is every URL form an adapter's opener accepts (read from each Open's parser), each
// holding the secret "hunter2" somewhere: a password, a lone user-info token, a secret query
// parameter, a nested server URL, percent-encoded, without a scheme, or not parsing at all.
// Hosts are 127.0.0.1:1 so that openers that dial fail at once.
var secretForms = []string{
	// memory: the user-info is ignored, but it may still be a secret.
	"memory://u:hunter2@name",
	"memory://hunter2@name?lease=1s",
	// redis and rediss: user:password, :password, a lone token, go-redis parameters.
	"redis://:hunter2@127.0.0.1:1/0",
	"redis://user:hunter2@127.0.0.1:1/0?txmq_prefix=p&dial_timeout=1s",
	"rediss://user:hunter2@127.0.0.1:1/0",
	"redis://hunter2@127.0.0.1:1/0",
	"redis://user:hun%74er2@127.0.0.1:1/0",
	"redis://user:hunter2@127.0.0.1:1/0?txmq_bogus=1",
	"redis://hunter2@127.0.0.1:1/0?txmq_lease=nope",
	"redis://127.0.0.1:1/0?password=hunter2",
	"redis://user:hunter2@127.0.0.1:port/0",
	// redis+cluster and rediss+cluster: the same, with several nodes.
	"redis+cluster://:hunter2@127.0.0.1:1,127.0.0.1:2/",
	"rediss+cluster://user:hunter2@127.0.0.1:1,127.0.0.1:2/?txmq_prefix=p&dial_timeout=1s",
	"redis+cluster://hunter2@127.0.0.1:1/",
	"redis+cluster://user:hunter2@127.0.0.1:1,127.0.0.1:2/3",
	"redis+cluster://user:hunter2@127.0.0.1:1,,127.0.0.1:2/",
	"redis+cluster://user:hunter2@127.0.0.1:1/?txmq_bogus=1",
	"redis+cluster://127.0.0.1:1/?password=hunter2",
	"redis+cluster://user:hunter2@127.0.0.1:1,127.0.0.1/",
	// postgres and postgresql (sqljobs).
	"postgres://u:hunter2@127.0.0.1:1/db?connect_timeout=1",
	"postgresql://u:hunter2@127.0.0.1:1/db?connect_timeout=1&txmq_schema=jobs",
	"postgres://u@127.0.0.1:1/db?connect_timeout=1&password=hunter2",
	"postgres://u@127.0.0.1:1/db?sslmode=bogus&sslpassword=hunter2",
	"postgres://u:hunter2@127.0.0.1:1/db?txmq_bogus=1",
	"postgres://u:hunter2@127.0.0.1:1/db?txmq_lease=nope",
	"postgres://u:hunter2%zz@127.0.0.1:1/db",
	// mysql and mariadb (SQL jobs on MySQL/MariaDB): user:password, DSN parameters, txmq_ errors.
	"mysql://u:hunter2@127.0.0.1:1/db?timeout=1s",
	"mariadb://u:hunter2@127.0.0.1:1/db?timeout=1s&txmq_poll_interval=50ms",
	"mysql://u:hunter2@127.0.0.1:1/db?txmq_bogus=1",
	"mysql://u:hunter2@127.0.0.1:1/db?txmq_lease=nope",
	"mysql://u:hunter2@127.0.0.1:1/",
	"mysql://u:hunter2%zz@127.0.0.1:1/db",
	"mysql://u@127.0.0.1:1/db?timeout=1s&password=hunter2",
	// sqlite and sqlite3: a file has no user-info (refused, never shown), no secret parameters.
	"sqlite://u:hunter2@secret-test.db",
	"sqlite3://hunter2@secret-test.db",
	"sqlite://secret-test.db?txmq_bogus=1&password=hunter2",
	"sqlite://secret-test.db?password=hunter2",
	// sqs and awssqs: KEY:SECRET as user-info.
	"sqs://AKID:hunter2@us-east-1?txmq_endpoint=http://127.0.0.1:1&txmq_request_timeout=1s",
	"awssqs://AKID:hunter2@us-east-1?txmq_bogus=1",
	"sqs://hunter2@us-east-1?txmq_max_native_delay=nope",
	"sqs://AKID:hunter2@us-east-1?txmq_endpoint=http://u:hunter2@127.0.0.1:1",
	// nats: a token as user-info, user:password, more servers, secret-looking parameters.
	"nats://hunter2@127.0.0.1:1",
	"nats://u:hunter2@127.0.0.1:1?txmq_timeout=1s",
	"nats://hunter2@127.0.0.1:1?txmq_bogus=1",
	"nats://hunter2@127.0.0.1:1?txmq_replicas=nope",
	"nats://127.0.0.1:1?txmq_servers=nats://hunter2@127.0.0.1:2,nats://u:hunter2@127.0.0.1:3",
	"nats://127.0.0.1:1?token=hunter2",
	"nats://hunter2@",
	// no scheme, unknown scheme, not parsing.
	"u:hunter2@127.0.0.1:6379",
	"hunter2@127.0.0.1:6379",
	"nosuch://u:hunter2@h",
	"nosuch://hunter2@h",
	"%zz://u:hunter2@h",
	"redis://u:hunter2@h:6379/0#frag",
}

// Secrets given in any accepted form never reach core.Redact's output, OpenBackend's error,
// Open's error, or the log line of a successful Open.
func TestSecretsNeverLeak(t *testing.T) {
	t.Parallel()
	for _, raw := range secretForms {
		t.Run(raw, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
			defer cancel()
			if got := core.Redact(raw); strings.Contains(got, "hunter2") {
				t.Errorf("core.Redact(%q) = %q", raw, got)
			}
			if be, err := txmq.OpenBackend(ctx, raw); err != nil {
				if strings.Contains(err.Error(), "hunter2") {
					t.Errorf("OpenBackend error leaks the secret: %v", err)
				}
			} else {
				_ = be.Close()
			}
			var logs syncBuffer
			log := slog.New(slog.NewTextHandler(&logs, nil))
			for _, cfg := range []*txmq.Config{
				{Backend: raw},
				{Backend: "memory://", Drain: []string{raw}},
			} {
				cfg.Logger = log
				app, err := txmq.Open(ctx, cfg)
				if err != nil {
					if strings.Contains(err.Error(), "hunter2") {
						t.Errorf("Open error leaks the secret: %v", err)
					}
					continue
				}
				_ = app.Close(ctx)
			}
			if strings.Contains(logs.String(), "hunter2") {
				t.Errorf("logs leak the secret:\n%s", logs.String())
			}
		})
	}
}

// syncBuffer is a log sink safe for concurrent use.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

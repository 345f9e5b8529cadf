package core

import (
	"errors"
	"fmt"
	"net/url"
	"strings"
	"testing"
)

func TestRedact(t *testing.T) {
	t.Parallel()
	tests := []struct{ in, want string }{
		{"", ""},
		{"memory://", "memory://"},
		{"memory:", "memory:"},
		{"memory://name?lease=1s", "memory://name?lease=1s"},
		{"redis://127.0.0.1:6379/0", "redis://127.0.0.1:6379/0"},
		{"redis://user:hunter2@h:1/0", "redis://user:xxxxx@h:1/0"},
		{"redis://:hunter2@h:6379/0", "redis://:xxxxx@h:6379/0"},
		{"redis://hunter2@h:6379/0", "redis://xxxxx@h:6379/0"},
		{"redis://u:p%40ss@h", "redis://u:xxxxx@h"},
		{"redis://u:pa@ss@h", "redis://u:xxxxx@h"},
		{"redis://u:hunter2@h:port/0", "redis://xxxxx@h:port/0"},
		{"redis://h/0#hunter2", "redis://h/0#xxxxx"},
		{"postgres://u@h/db?password=hunter2&sslmode=disable", "postgres://u@h/db?password=xxxxx&sslmode=disable"},
		{"postgres://u@h/db?sslmode=disable&password=p%40ss", "postgres://u@h/db?sslmode=disable&password=xxxxx"},
		{"postgres://u@h/db?pass%77ord=hunter2", "postgres://u@h/db?pass%77ord=xxxxx"},
		{"postgresql://app@db/app", "postgresql://app@db/app"},
		{"postgres://u:hunter2%zz@h/db", "postgres://xxxxx@h/db"},
		{"sqs://us-east-1?txmq_secret_key=abc&txmq_prefix=p", "sqs://us-east-1?txmq_secret_key=xxxxx&txmq_prefix=p"},
		{"sqs://AKID:hunter2@us-east-1?txmq_prefix=a", "sqs://AKID:xxxxx@us-east-1?txmq_prefix=a"},
		{"sqs://AKID@us-east-1", "sqs://xxxxx@us-east-1"},
		{"sqs://K:S@r?txmq_endpoint=http://u:hunter2@h:1", "sqs://K:xxxxx@r?txmq_endpoint=http%3A%2F%2Fu%3Axxxxx%40h%3A1"},
		{"nats://h:4222?token=abc", "nats://h:4222?token=xxxxx"},
		{"nats://hunter2@h:4222", "nats://xxxxx@h:4222"},
		{"NATS://hunter2@h:4222", "NATS://xxxxx@h:4222"},
		{"nats://h?txmq_servers=nats://tok@b:4222,nats://c:4222", "nats://h?txmq_servers=nats%3A%2F%2Fxxxxx%40b%3A4222%2Cnats%3A%2F%2Fc%3A4222"},
		{"nats://h?txmq_nkey=/etc/seed.nk&txmq_creds=/a.creds", "nats://h?txmq_nkey=xxxxx&txmq_creds=xxxxx"},
		{"u:hunter2@h:6379", "xxxxx@h:6379"},
		{"hunter2@h:6379/0?password=x", "xxxxx@h:6379/0?password=xxxxx"},
		{"%zz://u:hunter2@h", "xxxxx@h"},
		{"h:6379", "h:6379"},
		{"host=h user=u password='a b' dbname=d", "host=h user=u password=xxxxx dbname=d"},
		{"host=h sslpassword=s3 port=5432", "host=h sslpassword=xxxxx port=5432"},
		{"host=h password='unterminated dbname=d", "host=h password=xxxxx"},
		{"host=h PASSWORD=x", "host=h PASSWORD=xxxxx"},
		{"host=h user=admin@server", "host=h user=xxxxx@server"},
		{"postgres://u@h/db?sslmode=disable password='hunter2'", "postgres://u@h/db?sslmode=disable password=xxxxx"},
		{"redis://u:12#hunter2@h", "redis://xxxxx@h"},
		{"redis://u:12?hunter2@h", "redis://xxxxx@h"},
		{"redis://u:12/hunter2@h", "redis://xxxxx@h"},
		{"nats://hunter2#x@h", "nats://xxxxx@h"},
		{"redis://u:hunter2/x", "redis://xxxxx/x"},
		{"redis://h/%zz", "redis://h/%zz"},
	}
	for _, tt := range tests {
		if got := Redact(tt.in); got != tt.want {
			t.Errorf("Redact(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestRedactURLMatchesRedact(t *testing.T) {
	t.Parallel()
	u, err := url.Parse("nats://hunter2@h:4222?txmq_prefix=p")
	if err != nil {
		t.Fatal(err)
	}
	if got := RedactURL(u); got != "nats://xxxxx@h:4222?txmq_prefix=p" {
		t.Errorf("RedactURL = %q", got)
	}
	for raw, want := range map[string]string{"memory://": "memory://", "sqs://?txmq_prefix=a": "sqs://?txmq_prefix=a", "memory:name": "memory:name"} {
		if u, err := url.Parse(raw); err != nil || RedactURL(u) != want {
			t.Errorf("RedactURL(%s) = %q, want %q", raw, RedactURL(u), want)
		}
	}
	if got := RedactURL(nil); got != "" {
		t.Errorf("RedactURL(nil) = %q", got)
	}
}

func TestRedactText(t *testing.T) {
	t.Parallel()
	tests := []struct{ text, raw, secret string }{
		{"cannot use p@ss or p%40ss", "postgres://u@h/db?password=p%40ss", "p@ss"},
		{"cannot use p@ss or p%40ss", "postgres://u:p%40ss@h/db", "p%40ss"},
		{"token tok3n rejected", "nats://tok3n@h", "tok3n"},
		{"parse \"%zz://u:hunter2@h\": bad", "%zz://u:hunter2@h", "hunter2"},
		{"auth a b failed", "host=h password='a b'", "a b"},
		{"auth it's failed", `host=h password='it\'s'`, "it's"},
		{"dial nats://tok@b:4222 failed", "nats://h?txmq_servers=nats://tok@b:4222", "tok"},
	}
	for _, tt := range tests {
		if got := RedactText(tt.text, tt.raw); strings.Contains(got, tt.secret) {
			t.Errorf("RedactText(%q, %q) = %q, still holds %q", tt.text, tt.raw, got, tt.secret)
		}
	}
}

func TestRedactError(t *testing.T) {
	t.Parallel()
	if RedactError(nil, "x") != nil {
		t.Fatal("RedactError(nil) is not nil")
	}
	base := fmt.Errorf("connecting with hunter2: %w", ErrBackendUnavailable)
	err := RedactError(base, "redis://:hunter2@h")
	if strings.Contains(err.Error(), "hunter2") || !errors.Is(err, ErrBackendUnavailable) {
		t.Fatalf("RedactError = %v (Is unavailable: %v)", err, errors.Is(err, ErrBackendUnavailable))
	}
	if plain := errors.New("no secret here"); RedactError(plain, "redis://:hunter2@h") != plain {
		t.Fatal("RedactError wrapped an error that held no secret")
	}
}

// TestRedactTextShortSecret: a secret shorter than four bytes is replaced where it stands
// alone, not inside the words of the message (a password "p" must not garble "db.example").
func TestRedactTextShortSecret(t *testing.T) {
	t.Parallel()
	raw := "postgres://u:p@db.example:5432/db"
	tests := []struct{ text, want string }{
		{"dial tcp db.example:5432: connection refused", "dial tcp db.example:5432: connection refused"},
		{"password p was rejected", "password " + Redacted + " was rejected"},
		{"url u:p@db.example", "url u:" + Redacted + "@db.example"},
	}
	for _, tt := range tests {
		if got := RedactText(tt.text, raw); got != tt.want {
			t.Errorf("RedactText(%q) = %q, want %q", tt.text, got, tt.want)
		}
	}
}

package txmq

import (
	"errors"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestRunTimeoutDefaults(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name                   string
		timeout, grace         time.Duration
		wantTimeout, wantGrace time.Duration
	}{
		{"unset: 30 min, 1 min grace", 0, 0, DefaultRunTimeout, time.Minute},
		{"short: a tenth as grace", 2 * time.Second, 0, 2 * time.Second, 200 * time.Millisecond},
		{"long: grace at most 1 min", 2 * time.Hour, 0, 2 * time.Hour, time.Minute},
		{"grace kept", time.Second, 5 * time.Second, time.Second, 5 * time.Second},
		{"off", NoRunTimeout, 0, NoRunTimeout, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			to, g := runTimeoutDefaults(tt.timeout, tt.grace)
			if to != tt.wantTimeout || g != tt.wantGrace {
				t.Errorf("runTimeoutDefaults(%v, %v) = %v, %v; want %v, %v", tt.timeout, tt.grace, to, g, tt.wantTimeout, tt.wantGrace)
			}
		})
	}
}

func TestRunTimeoutValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		timeout time.Duration
		grace   time.Duration
		ok      bool
	}{
		{"default", 0, 0, true},
		{"set", time.Minute, 5 * time.Second, true},
		{"off", NoRunTimeout, 0, true},
		{"negative", -2 * time.Second, 0, false},
		{"below 1ms", time.Microsecond, 0, false},
		{"negative grace", time.Minute, -time.Second, false},
		{"grace without a timeout", NoRunTimeout, time.Second, false},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			reg := NewRegistry()
			q, err := DeclareIn(reg, "run-timeout-"+string(rune('a'+i)), QueueConfig[int]{Transactional: Try, RunTimeout: tt.timeout, RunTimeoutGrace: tt.grace})
			if tt.ok {
				if err != nil {
					t.Fatalf("DeclareIn: %v", err)
				}
				if want := max(tt.timeout, 0); tt.timeout != 0 && q.spec.RunTimeout != want {
					t.Errorf("spec RunTimeout %v; want %v", q.spec.RunTimeout, want)
				}
				return
			}
			if !errors.Is(err, core.ErrInvalidConfig) {
				t.Fatalf("DeclareIn: %v; want ErrInvalidConfig", err)
			}
		})
	}
}

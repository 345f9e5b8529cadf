package nats

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	natsgo "github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestNotStored(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"no responders", natsgo.ErrNoResponders, true},
		{"no stream response", fmt.Errorf("publish: %w", jetstream.ErrNoStreamResponse), true},
		{"jetstream not enabled", jetstream.ErrJetStreamNotEnabled, true},
		{"503 temporarily unavailable", &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}, true},
		{"not enabled for account", jetstream.ErrJetStreamNotEnabledForAccount, false},
		{"timeout: may be stored", natsgo.ErrTimeout, false},
		{"deadline: may be stored", context.DeadlineExceeded, false},
		{"connection closed", natsgo.ErrConnectionClosed, false},
		{"wrong last sequence", &jetstream.APIError{Code: 400, ErrorCode: 10071, Description: "wrong last sequence"}, false},
		{"message too large", jetstream.ErrStreamMessageExceedsMaximum, false},
	}
	for _, tt := range tests {
		if got := notStored(tt.err); got != tt.want {
			t.Errorf("%s: notStored = %v, want %v", tt.name, got, tt.want)
		}
	}
}

func TestRetryBusy(t *testing.T) {
	t.Parallel()
	busy := &jetstream.APIError{Code: 503, ErrorCode: 10008, Description: "JetStream system temporarily unavailable"}
	other := errors.New("bad request")
	tests := []struct {
		name      string
		script    []error // what each try returns; past its end, nil
		patience  time.Duration
		wantTries int
		wantErr   error
	}{
		{"first try succeeds", nil, time.Minute, 1, nil},
		{"two refusals, then stored", []error{busy, busy}, time.Minute, 3, nil},
		{"another error is not retried", []error{busy, other}, time.Minute, 2, other},
		{"no time left for another try", []error{busy, busy}, 0, 1, busy},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			be := &Backend{done: make(chan struct{})}
			tries := 0
			err := be.retryBusy(context.Background(), time.Now().Add(tt.patience), notStored, func() error {
				tries++
				if tries <= len(tt.script) {
					return tt.script[tries-1]
				}
				return nil
			})
			if tries != tt.wantTries || !errors.Is(err, tt.wantErr) && err != tt.wantErr {
				t.Fatalf("tries %d, err %v; want %d, %v", tries, err, tt.wantTries, tt.wantErr)
			}
		})
	}
}

func TestRetryBusyStopsAtClose(t *testing.T) {
	t.Parallel()
	be := &Backend{done: make(chan struct{})}
	tries := 0
	err := be.retryBusy(context.Background(), time.Now().Add(time.Hour), notStored, func() error {
		tries++
		if tries == 2 {
			close(be.done) // Close began while the call was refused
		}
		return natsgo.ErrNoResponders
	})
	if tries != 2 || !errors.Is(err, natsgo.ErrNoResponders) {
		t.Fatalf("tries %d, err %v; want 2 tries ending at Close", tries, err)
	}
}

package core

import (
	"context"
	"testing"
	"time"
)

// stubBackend is a Backend that does nothing.
type stubBackend struct{}

func (stubBackend) Publish(context.Context, OutgoingBatch) error               { return nil }
func (stubBackend) Fetch(context.Context, FetchRequest) ([]*Claim, error)      { return nil, nil }
func (stubBackend) Ack(context.Context, *Claim) error                          { return nil }
func (stubBackend) Retry(context.Context, *Claim, []byte, time.Duration) error { return nil }
func (stubBackend) Drop(context.Context, *Claim, string) error                 { return nil }
func (stubBackend) Extend(context.Context, *Claim, time.Duration) error        { return nil }
func (stubBackend) Depths(context.Context, []string) (map[string]Depth, error) { return nil, nil }
func (stubBackend) Close() error                                               { return nil }

type approxBackend struct {
	stubBackend
	settle time.Duration
}

func (a *approxBackend) DepthsSettle() time.Duration { return a.settle }

type unwrapper struct {
	stubBackend
	inner Backend
}

func (u *unwrapper) Unwrap() Backend { return u.inner }

func TestDepthsSettle(t *testing.T) {
	t.Parallel()
	approx := &approxBackend{settle: time.Minute}
	for _, tc := range []struct {
		name string
		b    Backend
		want time.Duration
	}{
		{"exact", &stubBackend{}, 0},
		{"approximate", approx, time.Minute},
		{"negative means exact", &approxBackend{settle: -time.Second}, 0},
		{"wrapped approximate", &unwrapper{inner: &unwrapper{inner: approx}}, time.Minute},
		{"wrapped exact", &unwrapper{inner: &stubBackend{}}, 0},
		{"nil", nil, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := DepthsSettle(tc.b); got != tc.want {
				t.Fatalf("DepthsSettle = %v; want %v", got, tc.want)
			}
		})
	}
}

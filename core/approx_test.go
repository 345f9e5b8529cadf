package core

import (
	"testing"
	"time"
)

type approxBackend struct {
	fakeBackend
	settle time.Duration
}

func (a *approxBackend) DepthsSettle() time.Duration { return a.settle }

type unwrapper struct {
	fakeBackend
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
		{"exact", &fakeBackend{}, 0},
		{"approximate", approx, time.Minute},
		{"negative means exact", &approxBackend{settle: -time.Second}, 0},
		{"wrapped approximate", &unwrapper{inner: &unwrapper{inner: approx}}, time.Minute},
		{"wrapped exact", &unwrapper{inner: &fakeBackend{}}, 0},
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

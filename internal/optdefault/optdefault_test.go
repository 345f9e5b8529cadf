package optdefault

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

func TestFill(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		in      time.Duration
		want    time.Duration
		wantErr string
	}{
		{"zero takes the default", 0, time.Second, ""},
		{"set is kept", 5 * time.Millisecond, 5 * time.Millisecond, ""},
		{"negative is refused", -time.Second, -time.Second, "outbox: Options.Wait is -1s; it must be >= 0 (0 means the default 1s)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			v := tc.in
			err := Fill("outbox", Field[time.Duration]{"Wait", &v, time.Second})
			if tc.wantErr == "" && err != nil || v != tc.want {
				t.Fatalf("Fill(%v) = %v, %v; want %v", tc.in, v, err, tc.want)
			}
			if tc.wantErr != "" && (!errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Fill(%v) error %v; want ErrInvalidConfig with %q", tc.in, err, tc.wantErr)
			}
		})
	}
	n := 0
	if err := Fill("ledger", Field[int]{"FlushSize", &n, 500}); err != nil || n != 500 {
		t.Fatalf("int field: %d, %v", n, err)
	}
}

package txmq

import (
	"errors"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
)

// TestPublishFairKey: a publish's fairness key is its FairKey option on a Fair queue, else
// the ordering key on an Ordered one, else empty; a fairness key on a queue that is not Fair,
// and an invalid one, are errors naming the queue.
func TestPublishFairKey(t *testing.T) {
	t.Parallel()
	spec := func(fair, ordered bool) *queueSpec {
		s := &queueSpec{}
		s.Name, s.Fair, s.Ordered = "q1", fair, ordered
		return s
	}
	for _, tt := range []struct {
		name    string
		spec    *queueSpec
		o       publishOptions
		want    string
		wantErr string
	}{
		{"not fair", spec(false, false), publishOptions{}, "", ""},
		{"not fair with a key", spec(false, false), publishOptions{fairKey: "t", fairSet: true}, "", "is not Fair"},
		{"fair without a key", spec(true, false), publishOptions{}, "", ""},
		{"fair with a key", spec(true, false), publishOptions{fairKey: "t-1", fairSet: true}, "t-1", ""},
		{"ordered: the ordering key", spec(true, true), publishOptions{key: "o-1", keySet: true}, "o-1", ""},
		{"ordered: FairKey wins", spec(true, true), publishOptions{key: "o-1", keySet: true, fairKey: "t-1", fairSet: true}, "t-1", ""},
		{"empty key", spec(true, false), publishOptions{fairSet: true}, "", "fairness key"},
		{"space", spec(true, false), publishOptions{fairKey: "a b", fairSet: true}, "", "fairness key"},
		{"too long", spec(true, false), publishOptions{fairKey: strings.Repeat("k", core.MaxKeyBytes+1), fairSet: true}, "", "fairness key"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := publishFairKey(tt.spec, tt.o)
			if tt.wantErr != "" {
				if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.wantErr) || !strings.Contains(err.Error(), `"q1"`) {
					t.Fatalf("publishFairKey = %q, %v; want ErrInvalidConfig naming queue q1 and %q", got, err, tt.wantErr)
				}
				return
			}
			if err != nil || got != tt.want {
				t.Fatalf("publishFairKey = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

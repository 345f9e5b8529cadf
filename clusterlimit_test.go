package txmq

import (
	"errors"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
)

func TestCheckLimitConfig(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		name                   string
		exclusive, fair        bool
		clusterLimit, keyLimit int
		want                   string // "" for valid
	}{
		{"none", false, false, 0, 0, ""},
		{"cluster limit", false, false, 5, 0, ""},
		{"key limit on a fair queue", false, true, 0, 2, ""},
		{"both", false, true, 5, 2, ""},
		{"negative cluster limit", false, false, -1, 0, "ClusterLimit is -1"},
		{"negative key limit", false, true, 0, -2, "KeyLimit is -2"},
		{"exclusive and cluster limit", true, false, 2, 0, "Exclusive and ClusterLimit"},
		{"exclusive and key limit", true, true, 0, 2, "Exclusive and KeyLimit"},
		{"key limit without fair", false, false, 0, 2, "needs Fair"},
	} {
		err := checkLimitConfig("q-limits", tt.exclusive, tt.fair, tt.clusterLimit, tt.keyLimit)
		switch {
		case tt.want == "" && err != nil:
			t.Errorf("%s: %v; want valid", tt.name, err)
		case tt.want != "" && (err == nil || !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "q-limits")):
			t.Errorf("%s: %v; want ErrInvalidConfig naming the queue and %q", tt.name, err, tt.want)
		}
	}
}

package sqljobs

import (
	"errors"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
)

func TestOptionsDefaultsAndNegatives(t *testing.T) {
	t.Parallel()
	c, err := (*Options)(nil).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if c.Schema != DefaultSchema || c.QueryTimeout != DefaultQueryTimeout || c.AbandonedAfter != DefaultAbandonedAfter ||
		c.PollInterval != DefaultPollInterval || c.ReapBatch != DefaultReapBatch || c.SettleBatch != DefaultSettleBatch ||
		c.SettleWindow != DefaultSettleWindow || c.ReapInterval != DefaultReapInterval || c.Logger == nil {
		t.Fatalf("defaults not filled: %+v", c)
	}
	for _, tc := range []struct {
		field string
		o     Options
	}{
		{"QueryTimeout", Options{QueryTimeout: -1}},
		{"AbandonedAfter", Options{AbandonedAfter: -1}},
		{"PollInterval", Options{PollInterval: -1}},
		{"ReapBatch", Options{ReapBatch: -1}},
		{"SettleBatch", Options{SettleBatch: -1}},
	} {
		t.Run(tc.field, func(t *testing.T) {
			t.Parallel()
			_, err := tc.o.withDefaults()
			if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), "sqljobs: Options."+tc.field) {
				t.Fatalf("withDefaults with negative %s = %v, want ErrInvalidConfig naming it", tc.field, err)
			}
		})
	}
}

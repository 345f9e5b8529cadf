package outbox

import (
	"testing"
	"time"
)

func TestBackoff(t *testing.T) {
	t.Parallel()
	tests := []struct {
		attempts int
		want     time.Duration
	}{
		{1, time.Minute}, {2, 2 * time.Minute}, {3, 4 * time.Minute}, {4, 8 * time.Minute},
		{5, 10 * time.Minute}, {50, 10 * time.Minute}, {0, time.Minute},
	}
	for _, tc := range tests {
		if got := backoff(time.Minute, 10*time.Minute, tc.attempts); got != tc.want {
			t.Errorf("backoff(attempts=%d) = %v, want %v", tc.attempts, got, tc.want)
		}
	}
}

func TestOptionsDefaults(t *testing.T) {
	t.Parallel()
	o, err := (*Options)(nil).withDefaults()
	if err != nil {
		t.Fatal(err)
	}
	if o.Schema != "txmq" || o.RecoveryAge != time.Minute || o.SweepInterval != 10*time.Second ||
		o.SweepPageSize != 100 || o.BackoffBase != time.Minute || o.BackoffMax != 10*time.Minute {
		t.Fatalf("defaults = %+v", o)
	}
	for _, bad := range []Options{{Schema: "1x"}, {Schema: `a"b`}, {RecoveryAge: -1}, {SweepPageSize: -1}} {
		if _, err := bad.withDefaults(); err == nil {
			t.Errorf("withDefaults(%+v) = nil error, want one", bad)
		}
	}
}

func TestInsertSQL(t *testing.T) {
	t.Parallel()
	got := insertSQL(`"s"."t"`, 2, true)
	want := `INSERT INTO "s"."t" (queue, batch_id, body, not_before, exclusive, order_key, next_attempt_at) VALUES ($1,$2,$3,clock_timestamp()+$4::bigint*interval '1 microsecond',$5,$6,now()),($7,$8,$9,clock_timestamp()+$10::bigint*interval '1 microsecond',$11,$12,now())`
	if got != want {
		t.Fatalf("insertSQL =\n%s\nwant\n%s", got, want)
	}
}

package sqlinspect

import (
	"database/sql"
	"math"
	"slices"
	"testing"
	"time"

	"github.com/txmq/txmq/core"
)

// TestStored: each state a row reads as, and its due time.
func TestStored(t *testing.T) {
	t.Parallel()
	const now = 1_000
	tests := []struct {
		name  string
		row   Row
		state core.BatchState
		due   int64 // 0: none
	}{
		{"due", Row{RunAt: now - 1}, core.BatchReady, 0},
		{"lease ended", Row{RunAt: now, Leased: true}, core.BatchReady, 0},
		{"in flight", Row{RunAt: now + 1, Leased: true}, core.BatchInFlight, 0},
		{"not due", Row{RunAt: now + 5}, core.BatchDelayed, now + 5},
		{"not due, due_at set", Row{RunAt: now + 5, DueAt: sql.NullInt64{Int64: now + 9, Valid: true}}, core.BatchDelayed, now + 9},
		{"held", Row{RunAt: HeldAt, Leased: true}, core.BatchDelayed, 0},
		{"held with a due time", Row{RunAt: HeldAt, DueAt: sql.NullInt64{Int64: now + 7, Valid: true}}, core.BatchDelayed, now + 7},
	}
	for _, tt := range tests {
		tt.row.Now = now
		tt.row.Batch = core.StoredBatch{ID: "b", Body: []byte("x"), Deliveries: 2}
		s := tt.row.Stored("q")
		var due time.Time
		if tt.due != 0 {
			due = time.UnixMicro(tt.due)
		}
		if s.State != tt.state || !s.Due.Equal(due) || s.Queue != "q" || s.ID != "b" || string(s.Body) != "x" || s.Deliveries != 2 {
			t.Errorf("%s: Stored = %+v, want state %v due %v", tt.name, s, tt.state, due)
		}
	}
}

// TestWalk: pages follow the last row's position, a short page ends the walk, fn stops it.
func TestWalk(t *testing.T) {
	t.Parallel()
	var rows []Row
	for i := range 5 {
		rows = append(rows, Row{ID: int64(i + 1), RunAt: int64(10 * i), Batch: core.StoredBatch{ID: string(rune('a' + i))}})
	}
	type pos struct{ at, id int64 }
	var asked []pos
	page := func(afterAt, afterID int64) ([]Row, error) {
		asked = append(asked, pos{afterAt, afterID})
		var out []Row
		for _, r := range rows {
			if (r.RunAt > afterAt || r.RunAt == afterAt && r.ID > afterID) && len(out) < 2 {
				out = append(out, r)
			}
		}
		return out, nil
	}
	var got []string
	done, err := Walk("q", 2, page, func(s core.StoredBatch) bool { got = append(got, s.ID); return true })
	if err != nil || !done || !slices.Equal(got, []string{"a", "b", "c", "d", "e"}) {
		t.Fatalf("Walk = %v, %v; got %v", done, err, got)
	}
	if want := []pos{{math.MinInt64, 0}, {10, 2}, {30, 4}}; !slices.Equal(asked, want) {
		t.Fatalf("pages asked at %v, want %v", asked, want)
	}
	got = nil
	done, err = Walk("q", 2, page, func(s core.StoredBatch) bool { got = append(got, s.ID); return len(got) < 3 })
	if err != nil || done || !slices.Equal(got, []string{"a", "b", "c"}) {
		t.Fatalf("Walk stopped by fn = %v, %v; got %v", done, err, got)
	}
}

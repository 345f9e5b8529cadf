package roundrobin

import (
	"fmt"
	"math"
	"testing"
)

type row struct {
	name string
	lane int
	due  int64
	id   int64
}

func TestOrder(t *testing.T) {
	t.Parallel()
	unlimited := func(int) int { return math.MaxInt }
	tests := []struct {
		name string
		rows []row
		room func(int) int
		want string
	}{
		{name: "empty", rows: nil, room: unlimited, want: "[]"},
		{name: "one row", rows: []row{{"a", 0, 1, 1}}, room: unlimited, want: "[a]"},
		{name: "one row, no room", rows: []row{{"a", 1, 1, 1}}, room: func(lane int) int { return []int{5, 0}[lane] }, want: "[]"},
		{name: "one lane by due then id", rows: []row{{"c", 0, 5, 3}, {"a", 0, 1, 9}, {"b", 0, 5, 2}}, room: unlimited, want: "[a b c]"},
		{name: "round-robin in lane order", rows: []row{{"b1", 1, 1, 1}, {"a2", 0, 2, 2}, {"a1", 0, 1, 3}, {"c1", 2, 9, 4}, {"a3", 0, 3, 5}, {"b2", 1, 2, 6}},
			room: unlimited, want: "[a1 b1 c1 a2 b2 a3]"},
		{name: "each lane cut to its room", rows: []row{{"a1", 0, 1, 1}, {"a2", 0, 2, 2}, {"a3", 0, 3, 3}, {"b1", 1, 1, 4}, {"b2", 1, 2, 5}},
			room: func(lane int) int { return []int{2, 0}[lane] }, want: "[a1 a2]"},
		{name: "lead ranks earlier within a lane only", rows: []row{{"a-late", 0, 100, 1}, {"a-lead", 0, -50, 2}, {"b", 1, -1000, 3}},
			room: unlimited, want: "[a-lead b a-late]"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := Order(tt.rows, func(r *row) Row { return Row{Lane: r.lane, Due: r.due, ID: r.id} }, tt.room)
			names := make([]string, len(got))
			for i, r := range got {
				names[i] = r.name
			}
			if s := fmt.Sprint(names); s != tt.want {
				t.Errorf("Order = %s, want %s", s, tt.want)
			}
		})
	}
}

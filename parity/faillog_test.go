package parity

import (
	"fmt"
	"testing"
)

func TestFailLogKeepsTheLastLines(t *testing.T) {
	t.Parallel()
	for _, n := range []int{0, 1, failLogLines, failLogLines + 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			t.Parallel()
			l := &failLog{}
			for i := range n {
				if _, err := fmt.Fprintf(l, "line %d\n", i); err != nil {
					t.Fatal(err)
				}
			}
			want := min(n, failLogLines)
			if len(l.lines) != want || l.seen != n {
				t.Fatalf("kept %d of %d lines; want %d of %d", len(l.lines), l.seen, want, n)
			}
			if n > 0 && l.lines[want-1] != fmt.Sprintf("line %d\n", n-1) {
				t.Fatalf("last kept line %q; want line %d", l.lines[want-1], n-1)
			}
			if n > failLogLines && l.lines[0] != fmt.Sprintf("line %d\n", n-failLogLines) {
				t.Fatalf("first kept line %q; want line %d", l.lines[0], n-failLogLines)
			}
		})
	}
}

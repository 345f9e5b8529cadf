package reaper

import (
	"context"
	"errors"
	"testing"
)

func TestInPages(t *testing.T) {
	t.Parallel()
	errPage := errors.New("page failed")
	for _, tc := range []struct {
		name      string
		pages     []int64 // what each page deletes; -1 fails
		wantTotal int64
		wantCalls int
		wantErr   error
	}{
		{"short first page", []int64{2}, 2, 1, nil},
		{"full pages then short", []int64{3, 3, 1}, 7, 3, nil},
		{"full pages then empty", []int64{3, 0}, 3, 2, nil},
		{"failure keeps what was deleted", []int64{3, -1}, 3, 2, errPage},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			calls := 0
			total, err := InPages(context.Background(), 3, func(context.Context) (int64, error) {
				n := tc.pages[calls]
				calls++
				if n < 0 {
					return 0, errPage
				}
				return n, nil
			})
			if total != tc.wantTotal || calls != tc.wantCalls || !errors.Is(err, tc.wantErr) || (tc.wantErr == nil && err != nil) {
				t.Fatalf("InPages = %d, %v after %d pages; want %d, %v after %d", total, err, calls, tc.wantTotal, tc.wantErr, tc.wantCalls)
			}
		})
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if total, err := InPages(ctx, 3, func(context.Context) (int64, error) { t.Fatal("page ran after cancel"); return 0, nil }); total != 0 || err != nil {
		t.Fatalf("InPages on a done ctx = %d, %v", total, err)
	}
}

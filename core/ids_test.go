package core

import (
	"strings"
	"testing"
	"time"
)

func TestIDTime(t *testing.T) {
	t.Parallel()
	before := time.Now().Truncate(time.Millisecond)
	id := NewID()
	after := time.Now()
	got, ok := IDTime(id)
	if !ok || got.Before(before) || got.After(after) {
		t.Fatalf("IDTime(NewID()) = %v, %v; want between %v and %v", got, ok, before, after)
	}
	for _, bad := range []string{"", "x", "order-42", strings.Repeat("u", 26), strings.Repeat("0", 25), strings.Repeat("0", 27), "ABCDEFGHJKMNPQRSTVWXYZ0123"} {
		if at, ok := IDTime(bad); ok {
			t.Errorf("IDTime(%q) = %v, true; want false", bad, at)
		}
	}
}

package core

import (
	mathrand "math/rand/v2"
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

// encodeID is idEncoding.Encode, byte for byte.
func TestEncodeIDMatchesBase32(t *testing.T) {
	t.Parallel()
	var b [16]byte
	check := func() {
		var got [26]byte
		encodeID(&got, &b)
		want := idEncoding.EncodeToString(b[:])
		if string(got[:]) != want {
			t.Fatalf("%x: encodeID %s, base32 %s", b, got[:], want)
		}
	}
	check() // all zero
	for i := range b {
		b[i] = 0xff
	}
	check()
	for bit := range 128 { // each bit alone lands in its character, at its place
		b = [16]byte{}
		b[bit/8] = 0x80 >> (bit % 8)
		check()
	}
	r := mathrand.New(mathrand.NewPCG(1, 2))
	for range 10000 {
		for i := range b {
			b[i] = byte(r.IntN(256))
		}
		check()
	}
}

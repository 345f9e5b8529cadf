package core

import (
	"testing"
	"time"
)

func TestParamNames(t *testing.T) {
	t.Parallel()
	if got := ParamNames(map[string]int{"b": 1, "c": 2, "a": 3}); got != "a, b, c" {
		t.Fatalf("ParamNames = %q", got)
	}
	if got := ParamNames(map[string]string{}); got != "" {
		t.Fatalf("ParamNames of none = %q", got)
	}
}

func TestParsePositive(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		v    string
		want time.Duration
		ok   bool
	}{{"30s", 30 * time.Second, true}, {"0s", 0, false}, {"-1s", 0, false}, {"soon", 0, false}} {
		d, err := ParsePositiveDuration(tt.v)
		if d != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParsePositiveDuration(%q) = %v, %v", tt.v, d, err)
		}
	}
	for _, tt := range []struct {
		v    string
		want int
		ok   bool
	}{{"7", 7, true}, {"0", 0, false}, {"-1", 0, false}, {"x", 0, false}} {
		n, err := ParsePositiveInt(tt.v)
		if n != tt.want || (err == nil) != tt.ok {
			t.Errorf("ParsePositiveInt(%q) = %v, %v", tt.v, n, err)
		}
	}
}

package memory

import (
	"context"
	"errors"
	"net/url"
	"strings"
	"testing"

	"github.com/txmq/txmq/core"
	"github.com/txmq/txmq/parity/urlfuzz"
)

func TestOpenBackend(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	open := func(raw string) core.Backend {
		t.Helper()
		be, err := core.OpenBackend(ctx, raw)
		if err != nil {
			t.Fatalf("OpenBackend(%q): %v", raw, err)
		}
		return be
	}

	a, b := open("memory://"), open("memory://")
	if a == b {
		t.Fatal("memory:// returned the same backend twice; want private ones")
	}
	a.Close()
	b.Close()

	x1 := open("memory://test-open-shared?txmq_lease=5s&txmq_fetch_limit=7&txmq_seed=3")
	x2 := open("memory://test-open-shared")
	if x1 != x2 {
		t.Fatal("memory://NAME returned two backends; want one shared per name")
	}
	x1.Close()
	x3 := open("memory://test-open-shared")
	defer x3.Close()
	if x3 == x1 {
		t.Fatal("a closed named backend was reopened; want a fresh one")
	}

	for _, bad := range []string{"memory://?txmq_lease=-1s", "memory://?txmq_fetch_limit=x", "memory://?nope=1", "memory://?lease=1s&txmq_lease=2s"} {
		if _, err := core.OpenBackend(ctx, bad); !errors.Is(err, core.ErrInvalidConfig) {
			t.Errorf("OpenBackend(%q): %v, want ErrInvalidConfig", bad, err)
		}
	}
}

// TestURLParams: txmq_seed sets Options.Seed, txmq_lease and txmq_fetch_limit are checked and
// ignored; the deprecated names lease, fetch_limit and seed are still accepted; both names of
// one parameter must agree.
func TestURLParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		url     string
		want    Options
		wantErr string
	}{
		{url: "memory://x?txmq_lease=5s&txmq_fetch_limit=7&txmq_seed=3", want: Options{Seed: 3}},
		{url: "memory://x?lease=5s&fetch_limit=7&seed=3", want: Options{Seed: 3}},
		{url: "memory://x?lease=5s&txmq_lease=5s", want: Options{}},
		{url: "memory://x?txmq_lease=5s&fetch_limit=2", want: Options{}},
		{url: "memory://x?lease=5s&txmq_lease=6s", wantErr: `parameters lease="5s" and txmq_lease="6s" disagree; lease is the deprecated name of txmq_lease`},
		{url: "memory://x?seed=1&txmq_seed=2", wantErr: "txmq_seed"},
		{url: "memory://x?txmq_lease=0s", wantErr: `txmq_lease="0s": must be positive`},
		{url: "memory://x?lease=0s", wantErr: `lease="0s": must be positive`},
		{url: "memory://x?txmq_fetch_limit=-1", wantErr: "txmq_fetch_limit"},
		{url: "memory://x?txmq_seed=-1", wantErr: "txmq_seed"},
		{url: "memory://x?txmq_bogus=1", wantErr: `unknown parameter "txmq_bogus"; accepted: txmq_fetch_limit, txmq_lease, txmq_seed (deprecated: lease, fetch_limit, seed)`},
	} {
		u, err := url.Parse(tc.url)
		if err != nil {
			t.Fatal(err)
		}
		got, err := optionsFromQuery(u)
		if tc.wantErr != "" {
			if !errors.Is(err, core.ErrInvalidConfig) || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want ErrInvalidConfig containing %q", tc.url, err, tc.wantErr)
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.url, err)
			continue
		}
		if got.Seed != tc.want.Seed {
			t.Errorf("%s: got %+v, want %+v", tc.url, *got, tc.want)
		}
	}
}

// TestURLParamNames: every accepted parameter follows the scheme every adapter uses, and every
// deprecated alias points at one of them.
func TestURLParamNames(t *testing.T) {
	t.Parallel()
	urlfuzz.CheckParamNames(t, urlParams, deprecatedParams)
}

package core

import "testing"

type inProcessBackend struct {
	stubBackend
	local bool
}

func (b *inProcessBackend) FetchesInProcess() bool { return b.local }

func TestFetchesInProcess(t *testing.T) {
	t.Parallel()
	local := &inProcessBackend{local: true}
	for _, tc := range []struct {
		name string
		b    Backend
		want bool
	}{
		{"remote", &stubBackend{}, false},
		{"in process", local, true},
		{"says no", &inProcessBackend{}, false},
		{"wrapped in process", &unwrapper{inner: &unwrapper{inner: local}}, true},
		{"wrapped remote", &unwrapper{inner: &stubBackend{}}, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			if got := FetchesInProcess(tc.b); got != tc.want {
				t.Fatalf("FetchesInProcess = %v; want %v", got, tc.want)
			}
		})
	}
}

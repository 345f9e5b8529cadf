package core

import "testing"

func TestUniqueHolderJudge(t *testing.T) {
	t.Parallel()
	const me, other = "b-me", "b-other"
	for _, c := range []struct {
		name string
		h    UniqueHolder
		m    UniqueMode
		id   string
		want UniqueVerdict
	}{
		{"window held by another", UniqueHolder{Batch: other, InWindow: true}, UniqueWindow, me, UniqueHeld},
		{"window held by itself", UniqueHolder{Batch: me, InWindow: true, Live: true}, UniqueWindow, me, UniqueSelf},
		{"window ended, holder live", UniqueHolder{Batch: other, Live: true}, UniqueWindow, me, UniqueStore},
		{"until started, not started", UniqueHolder{Batch: other, Live: true}, UniqueUntilStarted, me, UniqueHeld},
		{"until started, started", UniqueHolder{Batch: other, Live: true, Started: true}, UniqueUntilStarted, me, UniqueStore},
		{"until started, gone", UniqueHolder{Batch: other}, UniqueUntilStarted, me, UniqueStore},
		{"until started, itself", UniqueHolder{Batch: me, Live: true}, UniqueUntilStarted, me, UniqueSelf},
		{"until done, running", UniqueHolder{Batch: other, Live: true, Started: true}, UniqueUntilDone, me, UniqueHeld},
		{"until done, done", UniqueHolder{Batch: other, Started: true}, UniqueUntilDone, me, UniqueStore},
		{"until done, itself", UniqueHolder{Batch: me, Live: true, Started: true}, UniqueUntilDone, me, UniqueSelf},
		{"debounce, unstarted holder", UniqueHolder{Batch: other, Live: true, InWindow: true}, UniqueDebounce, me, UniqueReplace},
		{"debounce, started holder", UniqueHolder{Batch: other, Live: true, Started: true}, UniqueDebounce, me, UniqueStore},
		{"debounce, holder gone", UniqueHolder{Batch: other}, UniqueDebounce, me, UniqueStore},
		{"debounce, itself", UniqueHolder{Batch: me, Live: true}, UniqueDebounce, me, UniqueSelf},
		{"debounce, itself gone", UniqueHolder{Batch: me}, UniqueDebounce, me, UniqueStore},
	} {
		if got := c.h.Judge(c.m, c.id); got != c.want {
			t.Errorf("%s: Judge(%v) = %d, want %d", c.name, c.m, got, c.want)
		}
	}
}

package reaper

import (
	"errors"
	"slices"
	"testing"

	"github.com/txmq/txmq/core"
)

// TestGive: batches are given in order up to the first refused; each given is removed, and
// an unheld keyed one promotes its key's next row; an error of remove ends the page.
func TestGive(t *testing.T) {
	t.Parallel()
	page := []Picked{
		{ID: 1, DeadLetter: &core.DeadLetter{BatchID: "a"}},
		{ID: 2, DeadLetter: &core.DeadLetter{BatchID: "b"}, Key: "k", Keyed: true},
		{ID: 3, DeadLetter: &core.DeadLetter{BatchID: "c"}, Key: "k", Keyed: true, Held: true},
		{ID: 4, DeadLetter: &core.DeadLetter{BatchID: "refused"}},
		{ID: 5, DeadLetter: &core.DeadLetter{BatchID: "e"}},
	}
	var gave []string
	var removed, promotedIDs []int64
	give := func(dl *core.DeadLetter) error {
		if dl.BatchID == "refused" {
			return errors.New("sink down")
		}
		gave = append(gave, dl.BatchID)
		return nil
	}
	remove := func(id int64) error { removed = append(removed, id); return nil }
	promote := func(key string, id int64) (bool, error) {
		promotedIDs = append(promotedIDs, id)
		return key == "k", nil
	}
	given, promoted, err := Give(page, give, remove, promote)
	if err != nil || given != 3 || !promoted {
		t.Fatalf("Give = %d, %v, %v; want 3, true, nil", given, promoted, err)
	}
	if !slices.Equal(gave, []string{"a", "b", "c"}) || !slices.Equal(removed, []int64{1, 2, 3}) || !slices.Equal(promotedIDs, []int64{2}) {
		t.Fatalf("gave %v, removed %v, promoted %v", gave, removed, promotedIDs)
	}
	boom := errors.New("boom")
	given, _, err = Give(page, give, func(id int64) error {
		if id == 2 {
			return boom
		}
		return nil
	}, promote)
	if !errors.Is(err, boom) || given != 1 {
		t.Fatalf("Give with a failing remove = %d, %v; want 1 given and its error", given, err)
	}
}

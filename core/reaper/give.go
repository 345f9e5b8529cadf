package reaper

import "github.com/txmq/txmq/core"

// Picked is one batch a page of an abandoned queue picked (Store.Page): its row's id, its
// dead letter, and its ordering key, if any (Held: the row waits behind the key's first row).
type Picked struct {
	ID         int64
	DeadLetter *core.DeadLetter
	Key        string
	Keyed      bool
	Held       bool
}

// Give hands the batches of page to give in order, up to the first one give refuses. Each
// one given is removed (remove, by row id), and when it headed its ordering key the key's
// next row is made due (promote, which reports whether there was one). It returns how many
// were given and whether any row was promoted (the queue's waiting fetches are then woken);
// an error of remove or promote ends it.
func Give(page []Picked, give func(*core.DeadLetter) error, remove func(id int64) error, promote func(key string, id int64) (bool, error)) (given int, promoted bool, err error) {
	for _, p := range page {
		if give(p.DeadLetter) != nil {
			break
		}
		if err := remove(p.ID); err != nil {
			return given, promoted, err
		}
		if p.Keyed && !p.Held {
			ok, err := promote(p.Key, p.ID)
			if err != nil {
				return given, promoted, err
			}
			promoted = promoted || ok
		}
		given++
	}
	return given, promoted, nil
}

package reaper

import "context"

// InPages runs page (one statement deleting at most batch rows, returning how many it
// deleted) until a page deletes fewer than batch, page fails, or ctx ends, and returns the
// total deleted. The adapters prune expired dedup ids with it (Store.PruneIDs).
func InPages(ctx context.Context, batch int, page func(context.Context) (int64, error)) (int64, error) {
	var total int64
	for ctx.Err() == nil {
		n, err := page(ctx)
		if err != nil {
			return total, err
		}
		total += n
		if n < int64(batch) {
			break
		}
	}
	return total, nil
}

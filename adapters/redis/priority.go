package redis

import "time"

// Priorities (core.Prioritizer). A batch published with a lead (core.OutgoingBatch.Lead: its
// priority times its queue's aging step) keeps the lead in ms in the queue's lead hash
// (KEYS[9]) and enters the due set scored by its due time minus the lead, so that ZRANGEBYSCORE
// hands the ready batches out by "due - lead": the higher priority first, the older first once
// it waited longer than the difference in lead. Every later score of the batch (a retry's due
// time, an expired lease's end, a held batch of an ordered key becoming the head) takes the
// lead off the same way, and an ack or drop forgets it.
//
// A score up to the lead below now does not mean due: the claim of a queue with leads
// (dueByLead in scripts.go) reads the leads of the entries it finds and skips the ones whose
// score plus lead is still ahead, scanning at most 1,024 entries per claim. Only delayed
// batches with a lead (a delayed publish, a retry's backoff) within their lead of their due
// time are skipped, so the scan is short unless very many such batches pile up; those become
// due within the lead (at most 9 aging steps). Depths and OldestReady read the scores as they
// are, so a batch within its lead of its due time counts as ready. Queues without leads run
// the scripts as before, plus one EXISTS.
//
// Cost: one HSET per publish with a lead and one HDEL per settle of a queue with leads; a
// claim of such a queue adds one HMGET per page it reads.

// Prioritizes implements core.Prioritizer: the Redis backend honours priorities.
func (be *Backend) Prioritizes() error { return nil }

// leadMs is a lead in whole milliseconds (rounded down: never more than the engine's), 0
// for none.
func leadMs(lead time.Duration) int64 {
	if lead <= 0 {
		return 0
	}
	return int64(lead / time.Millisecond)
}

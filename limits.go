package txmq

// NoSizeLimit, as a QueueConfig or NodeOptions size setting, turns the library's size limit off;
// the backend's own limit (SizeLimiter) still applies.
const NoSizeLimit = -1

// DefaultMaxMessageBytes is the default largest encoded (JSON) message a publish accepts: 1 MiB.
const DefaultMaxMessageBytes = 1 << 20

// DefaultMaxBatchBytes is the default soft size limit of an encoded batch: 8 MiB. Batches are cut
// to stay under it; a batch always holds at least one message.
const DefaultMaxBatchBytes = 8 << 20

package sqs

import "time"

// depthsSettle is how long the adapter's Depths may lag behind what SQS holds. Depths reads
// the ApproximateNumberOfMessages* queue attributes, which AWS documents as approximate and
// eventually consistent (a message sent, received or deleted may not be counted for up to
// about a minute).
const depthsSettle = time.Minute

// DepthsSettle implements core.ApproximateDepths: SQS's counts are approximate, so code that
// concludes a queue is empty (the drain wrapper retiring an old SQS backend, or letting a new
// backend run an Exclusive queue) waits until every reading was empty for a minute, and for
// at least one visibility timeout (the lease).
func (be *Backend) DepthsSettle() time.Duration { return depthsSettle }

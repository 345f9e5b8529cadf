package sqljobs

import (
	"fmt"

	"github.com/txmq/txmq/core"
)

// maxBatchBytes is the largest batch body Publish sends: PostgreSQL's 1 GB limit on a value
// (and on a protocol message), less room for the statement's other parameters.
const maxBatchBytes = 1<<30 - 1<<20

var _ core.SizeLimiter = (*Backend)(nil)

// MaxBatchBytes returns the largest batch body the backend stores (just under PostgreSQL's 1 GB
// value limit). It implements core.SizeLimiter.
func (be *Backend) MaxBatchBytes() int { return maxBatchBytes }

// checkSize refuses a body over maxBatchBytes before it is sent: PostgreSQL ends the connection
// of a message over 1 GB, which would look like an outage.
func checkSize(op string, size int) error {
	if size > maxBatchBytes {
		return fmt.Errorf("sqljobs: %s: the batch is %d bytes, over the %d bytes a bytea value of one statement can carry: %w; lower core's NodeOptions.MaxBatchBytes/MaxMessageBytes",
			op, size, maxBatchBytes, core.ErrRejected)
	}
	return nil
}

package envelope

import (
	"fmt"

	"github.com/txmq/txmq/core"
	// Split cuts an encoded batch into two batches of about half its messages each, for an
	// adapter that cannot store the batch whole (a message size limit) and has nowhere else to put
	// it. Each half keeps the attempt count, its messages' trace contexts and ids, and gets a new
	// batch id. A batch of one message cannot be split: that is an error wrapping ErrRejected and
	// ErrInvalidPayload. Splitting is the one sanctioned case of an adapter looking inside a batch.
)

func Split(body []byte) ([][]byte, error) {
	e, err := Decode(body)
	if err != nil {
		return nil, err
	}
	if len(e.Messages) < 2 {
		return nil, fmt.Errorf("%w (%w): queue %q, batch %s: one message of %d bytes is larger than the backend can store", core.ErrRejected, core.ErrInvalidPayload, e.Queue, e.ID, len(body))
	}
	half := len(e.Messages) / 2
	out := make([][]byte, 0, 2)
	for _, part := range [][2]int{{0, half}, {half, len(e.Messages)}} {
		p := *e
		p.ID = core.NewID()
		p.KeepMessages(func(i int) bool { return i >= part[0] && i < part[1] })
		out = append(out, Encode(&p))
	}
	return out, nil
}

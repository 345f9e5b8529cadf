package parity

import (
	"bytes"
	"time"

	"github.com/txmq/txmq/internal/envelope"
)

func init() {
	register("contract",
		property{name: "body_ownership", run: bodyOwnership},
	)
}

// scribble overwrites every byte of b, as a caller reusing its buffer would.
func scribble(b []byte, c byte) {
	for i := range b {
		b[i] = c
	}
}

// bodyOwnership: OutgoingBatch.Body and the body given to Retry are the adapter's for the
// call only: the caller overwrites them as soon as the call returns, and the batch is still
// delivered with the bytes it had during the call. A Claim.Body is the caller's once Fetch
// returned: it does not change while later calls run, its own Retry and Ack included.
func bodyOwnership(x *X) {
	ctx := x.ctx()
	b := x.rawClient()
	qn := x.queueName()
	lease := 3 * x.Caps.Lease

	batch := rawBatch(qn, false, "body-a")
	orig := bytes.Clone(batch.Body)
	if err := b.Publish(ctx, batch); err != nil {
		x.T.Fatalf("Publish: %v", err)
	}
	scribble(batch.Body, 'X')
	c := fetchOne(x, b, qn, lease)
	if !bytes.Equal(c.Body, orig) {
		x.T.Fatalf("the caller overwrote OutgoingBatch.Body after Publish returned, and the claim's body changed with it: got %q", envelope.Truncate(c.Body, 80))
	}
	held := bytes.Clone(c.Body)

	retryBody, err := envelope.ReencodeAttempt(orig, 1)
	if err != nil {
		x.T.Fatalf("re-encoding the body: %v", err)
	}
	rewritten := bytes.Clone(retryBody)
	if err := b.Retry(ctx, c, retryBody, 0); err != nil {
		x.T.Fatalf("Retry: %v", err)
	}
	scribble(retryBody, 'Y')
	if !bytes.Equal(c.Body, held) {
		x.T.Fatalf("Claim.Body changed under the caller during its Retry")
	}
	c2 := fetchOne(x, b, qn, lease)
	if !bytes.Equal(c2.Body, rewritten) && !bytes.Equal(c2.Body, orig) {
		x.T.Fatalf("after a Retry whose body the caller overwrote when it returned, the batch came back with %q; want the retried body (a rewrite) or the original (in place)", envelope.Truncate(c2.Body, 80))
	}
	if !bytes.Equal(c.Body, held) {
		x.T.Fatalf("Claim.Body of the retried claim changed when the batch was handed out again")
	}
	held2 := bytes.Clone(c2.Body)

	// Later calls on the same client, other batches of the same queue among them.
	for i, k := range []string{"body-b", "body-c"} {
		other := rawBatch(qn, false, k)
		if err := b.Publish(ctx, other); err != nil {
			x.T.Fatalf("Publish: %v", err)
		}
		scribble(other.Body, 'Z')
		oc := fetchOne(x, b, qn, lease)
		if err := b.Extend(ctx, c2, lease); err != nil {
			x.T.Fatalf("Extend: %v", err)
		}
		var err error
		if i == 0 {
			err = b.Retry(ctx, oc, bytes.Repeat([]byte{'W'}, len(oc.Body)), time.Hour)
		} else {
			err = b.Ack(ctx, oc)
		}
		if err != nil {
			x.T.Fatalf("settling another claim: %v", err)
		}
		if !bytes.Equal(c2.Body, held2) {
			x.T.Fatalf("Claim.Body changed while later calls ran on the client")
		}
	}
	if err := b.Ack(ctx, c2); err != nil {
		x.T.Fatalf("Ack: %v", err)
	}
	if _, err := b.Depths(ctx, []string{qn}); err != nil {
		x.T.Fatalf("Depths: %v", err)
	}
	if !bytes.Equal(c2.Body, held2) || !bytes.Equal(c.Body, held) {
		x.T.Fatalf("Claim.Body changed after the claim was acked")
	}
}

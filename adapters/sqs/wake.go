package sqs

import (
	"context"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"

	"github.com/txmq/txmq/core"
)

// Close ends this client's long polls early with wake messages rather than cutting them or
// waiting them out (up to IdleWait, 20 s by default). Cutting a receive is not safe: SQS (and
// fauxqs) go on serving a receive whose client went away, so a batch sent meanwhile would be
// hidden for its visibility timeout and come back with its receive count one higher, a run
// spent that never ran. A wake is a message of its own that SQS hands to a waiting receive
// like any other, which then returns at once with a normal response: whatever batches came
// with it are given back uncounted (see release), and the wake itself is deleted by whoever
// receives it (every client of this version does, and never hands it out).
const (
	// attrWake marks a wake message; its value says why it was sent.
	attrWake = "txmq-wake"
	wakeBody = "txmq: wake (ends a long poll; deleted by the client that receives it)"
	// wakeEvery is how often Close sends another wake while its poll still waits: in SQS a
	// wake goes to one waiting receive, possibly another client's (which deletes it and polls
	// again), so Close tries again.
	wakeEvery = time.Second
	// wakeMin is the least wait a poll must have left for Close to wake it: one that ends
	// on its own sooner is left to do so, so that a wake seldom outlives the polls it was for.
	wakeMin = 500 * time.Millisecond
	// wakeGroupPrefix starts the message group of a wake in a FIFO queue: a group of its
	// own, so that it never waits behind (or holds up) a batch.
	wakeGroupPrefix = "txmq-wake-"
)

// isWake reports whether m is a wake message.
func isWake(m types.Message) bool {
	_, ok := m.MessageAttributes[attrWake]
	return ok
}

// dropWake deletes a received wake message. One that cannot be deleted comes back after its
// visibility timeout and is deleted by its next receiver.
func (be *Backend) dropWake(ctx context.Context, queue, url string, m types.Message) {
	if err := be.deleteMsg(ctx, url, aws.ToString(m.ReceiptHandle)); err != nil {
		be.log.Warn("sqs: deleting a wake message failed; it comes back after its visibility timeout and the next receive deletes it", "queue", queue, "error", err)
	}
}

// wakePolls ends this client's outstanding long polls (Close calls it once closed is set,
// so no new poll starts): while a poll still has more than wakeMin of its wait left, it sends
// a wake to the poll's SQS queue every wakeEvery until the poll ends. It returns when every
// poll it woke ended, or would have ended on its own.
func (be *Backend) wakePolls() {
	type target struct {
		k     pollKey
		done  chan struct{}
		until time.Time
	}
	var targets []target
	be.mu.Lock()
	for k, p := range be.pollers {
		if p.busy && p.wait > 0 {
			targets = append(targets, target{k, p.done, p.last.Add(time.Duration(p.wait) * time.Second)})
		}
	}
	be.mu.Unlock()
	var wg sync.WaitGroup
	for _, t := range targets {
		wg.Go(func() {
			for time.Until(t.until) > wakeMin {
				be.wake(t.k)
				select {
				case <-t.done:
					return
				case <-time.After(wakeEvery):
				}
			}
		})
	}
	wg.Wait()
}

// wake sends one wake message to the SQS queue of k (which its poll already looked up).
func (be *Backend) wake(k pollKey) {
	ctx, cancel := context.WithTimeout(context.Background(), be.opts.RequestTimeout)
	defer cancel()
	u, err := be.url(ctx, k.queue, k.k, false)
	if err != nil || u == "" {
		return // the poll's own lookup failed or is still running: it ends on its own
	}
	in := &awssqs.SendMessageInput{
		QueueUrl:    aws.String(u),
		MessageBody: aws.String(wakeBody),
		MessageAttributes: map[string]types.MessageAttributeValue{
			attrWake: {DataType: aws.String("String"), StringValue: aws.String("close")},
		},
	}
	if k.k == kindFIFO {
		id := core.NewID()
		in.MessageGroupId, in.MessageDeduplicationId = aws.String(wakeGroupPrefix+id), aws.String(id)
	}
	be.count(opSend)
	if _, err := be.client.SendMessage(ctx, in); err != nil {
		be.log.Debug("sqs: sending a wake to end a long poll at Close failed; Close waits for the poll to end on its own", "queue", k.queue, "error", err)
	}
}

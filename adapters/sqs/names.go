package sqs

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"strconv"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/txmq/txmq/core"
)

// kind is one of the SQS queues backing a txmq queue.
type kind int

const (
	// kindStandard is the main queue of an ordinary txmq queue: Prefix+name.
	kindStandard kind = iota
	// kindFIFO is the main queue of an Exclusive or Ordered txmq queue: Prefix+name+".fifo",
	// one message group for an Exclusive queue (SQS never hands out a second batch while one
	// is in flight), one per ordering key for an Ordered one.
	kindFIFO
	// kindHold is the holding queue for batches not due within MaxNativeDelay (and, for
	// Exclusive queues, for every delayed batch, as FIFO queues have no per-message delay):
	// Prefix+name+"-Delayed". The upper-case letter keeps it apart from every txmq name.
	kindHold
)

const (
	fifoSuffix = ".fifo"
	holdSuffix = "-Delayed"
	// groupID is the one message group of an Exclusive queue's FIFO queue.
	groupID = "txmq"
	// retention is SQS's longest retention (14 days): a batch waiting out a long retry is
	// not expired by the default of 4 days. Long delays are re-sent every MaxNativeDelay, so
	// they restart the clock and may exceed 14 days.
	retention  = 14 * 24 * 3600
	maxSQSName = 80
)

var queueNameRE = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,63}$`)

// mainKind is the kind of the main queue of a txmq queue: the FIFO queue for an Exclusive or
// an Ordered queue, else the standard queue.
func mainKind(exclusive, ordered bool) kind {
	if exclusive || ordered {
		return kindFIFO
	}
	return kindStandard
}

// sqsName is the SQS name of queue's queue of kind k.
func (be *Backend) sqsName(queue string, k kind) string {
	switch k {
	case kindFIFO:
		return be.opts.Prefix + queue + fifoSuffix
	case kindHold:
		return be.opts.Prefix + queue + holdSuffix
	default:
		return be.opts.Prefix + queue
	}
}

// checkName validates a txmq queue name and the SQS names derived from it.
func (be *Backend) checkName(op, queue string) error {
	if !queueNameRE.MatchString(queue) {
		return fmt.Errorf("%w: sqs: %s: queue name %q is not a txmq queue name (^[a-z][a-z0-9_-]{0,63}$)", core.ErrInvalidConfig, op, queue)
	}
	if n := len(be.sqsName(queue, kindHold)); n > maxSQSName {
		return fmt.Errorf("%w: sqs: %s: queue %q gives SQS names of up to %d characters with prefix %q; SQS allows %d: use a shorter prefix or queue name", core.ErrInvalidConfig, op, queue, n, be.opts.Prefix, maxSQSName)
	}
	return nil
}

// url returns the URL of queue's SQS queue of kind k, from the cache, else by GetQueueUrl,
// creating the queue when it does not exist and create is set. With create unset, a missing
// queue gives "" and a nil error. Concurrent first uses of one SQS queue share a single lookup
// (and creation): a flush publishing many batches to a new queue, or a Fetch and a Publish
// meeting on it, make one GetQueueUrl and at most one CreateQueue, not one each.
func (be *Backend) url(ctx context.Context, queue string, k kind, create bool) (string, error) {
	name := be.sqsName(queue, k)
	for {
		be.urlMu.Lock()
		if u, ok := be.urls[name]; ok {
			be.urlMu.Unlock()
			return u, nil
		}
		f := be.urlFlights[name]
		if f == nil {
			f = &urlFlight{done: make(chan struct{}), create: create}
			be.urlFlights[name] = f
			be.urlMu.Unlock()
			be.resolve(ctx, f, name, queue, k)
			return f.url, f.err
		}
		be.urlMu.Unlock()
		// Another call is resolving name: wait for it. A lookup without create that found no
		// queue does not answer a call that must create it, and a flight that failed on its
		// own caller's context is not this call's failure: look again.
		select {
		case <-f.done:
		case <-ctx.Done():
			return "", wrap("look up SQS queue "+name, queue, ctx.Err())
		}
		if f.err == nil && (f.url != "" || !create) {
			return f.url, nil
		}
		if f.err != nil && classify(f.err) != classCanceled && !errors.Is(f.err, context.DeadlineExceeded) {
			return "", f.err
		}
		if ctx.Err() != nil {
			return "", wrap("look up SQS queue "+name, queue, ctx.Err())
		}
	}
}

// urlFlight is one lookup (and creation) of an SQS queue's URL in progress.
type urlFlight struct {
	done   chan struct{}
	create bool
	url    string
	err    error
}

// resolve runs f: GetQueueUrl, then CreateQueue when the queue is missing and f.create is
// set. It caches a URL found and ends the flight.
func (be *Backend) resolve(ctx context.Context, f *urlFlight, name, queue string, k kind) {
	defer func() {
		be.urlMu.Lock()
		if f.err == nil && f.url != "" {
			be.urls[name] = f.url
		}
		delete(be.urlFlights, name)
		be.urlMu.Unlock()
		close(f.done)
	}()
	out, err := be.client.GetQueueUrl(ctx, &awssqs.GetQueueUrlInput{QueueName: aws.String(name)})
	switch {
	case err == nil:
		f.url = aws.ToString(out.QueueUrl)
	case isNoQueue(err) && !f.create:
	case isNoQueue(err):
		attrs := map[string]string{"MessageRetentionPeriod": strconv.Itoa(retention)}
		if k == kindFIFO {
			attrs["FifoQueue"] = "true"
			attrs["ContentBasedDeduplication"] = "false"
		}
		cout, cerr := be.client.CreateQueue(ctx, &awssqs.CreateQueueInput{QueueName: aws.String(name), Attributes: attrs})
		if cerr != nil {
			f.err = wrap("create SQS queue "+name, queue, cerr)
			return
		}
		f.url = aws.ToString(cout.QueueUrl)
	default:
		f.err = wrap("look up SQS queue "+name, queue, err)
	}
}

// forgetURL drops a cached URL after SQS said the queue does not exist, so the next call
// looks it up (and creates it) again.
func (be *Backend) forgetURL(queue string, k kind) {
	be.urlMu.Lock()
	delete(be.urls, be.sqsName(queue, k))
	be.urlMu.Unlock()
}

// EnsureQueues creates the SQS queues of the named ordinary (non-Exclusive) txmq queues now,
// rather than on first use: the standard queue and its holding queue for long delays.
// Existing queues are left as they are.
func (be *Backend) EnsureQueues(ctx context.Context, queues ...string) error {
	return be.ensure(ctx, false, queues)
}

// EnsureExclusiveQueues is EnsureQueues for Exclusive txmq queues: the FIFO queue and the
// holding queue.
func (be *Backend) EnsureExclusiveQueues(ctx context.Context, queues ...string) error {
	return be.ensure(ctx, true, queues)
}

func (be *Backend) ensure(ctx context.Context, exclusive bool, queues []string) error {
	if err := be.usable("ensure queues", ""); err != nil {
		return err
	}
	for _, q := range queues {
		if err := be.checkName("ensure queues", q); err != nil {
			return err
		}
		for _, k := range []kind{mainKind(exclusive, false), kindHold} {
			if _, err := be.url(ctx, q, k, true); err != nil {
				return err
			}
		}
	}
	return nil
}

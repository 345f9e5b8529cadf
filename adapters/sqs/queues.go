package sqs

import (
	"context"
	"path"
	"slices"
	"strings"

	"github.com/aws/aws-sdk-go-v2/aws"
	awssqs "github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/txmq/txmq/core"
)

var _ core.QueueLister = (*Backend)(nil)

// Queues lists the txmq queues whose SQS queues exist under the Backend's Prefix
// (core.QueueLister): ListQueues by prefix, each SQS name mapped back to its txmq queue (the
// standard, FIFO and -Delayed queues of one txmq queue give one name; a name that no txmq
// queue gives is left out). An SQS queue stays after its messages are deleted, so every queue
// published to (or fetched from) is listed until its SQS queues are deleted. With an empty
// Prefix every queue of the account and region whose name is a txmq queue name is listed.
func (be *Backend) Queues(ctx context.Context) ([]string, error) {
	if err := be.usable("queues", ""); err != nil {
		return nil, err
	}
	in := &awssqs.ListQueuesInput{MaxResults: aws.Int32(1000)}
	if be.opts.Prefix != "" {
		in.QueueNamePrefix = aws.String(be.opts.Prefix)
	}
	var out []string
	pages := awssqs.NewListQueuesPaginator(be.client, in)
	for pages.HasMorePages() {
		cctx, cancel := context.WithTimeout(ctx, be.opts.RequestTimeout)
		page, err := pages.NextPage(cctx)
		cancel()
		if err != nil {
			return nil, wrap("queues: ListQueues", "", err)
		}
		for _, u := range page.QueueUrls {
			if q, ok := be.txmqName(path.Base(u)); ok {
				out = append(out, q)
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

// txmqName returns the txmq queue an SQS queue name belongs to (see sqsName), if any.
func (be *Backend) txmqName(sqsName string) (string, bool) {
	rest, ok := strings.CutPrefix(sqsName, be.opts.Prefix)
	if !ok {
		return "", false
	}
	if q, ok := strings.CutSuffix(rest, fifoSuffix); ok {
		rest = q
	} else if q, ok := strings.CutSuffix(rest, holdSuffix); ok {
		rest = q
	}
	return rest, queueNameRE.MatchString(rest)
}

package nats

import (
	"context"
	"slices"
	"strings"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/txmq/txmq/core"
)

var _ core.QueueLister = (*Backend)(nil)

// Queues lists the queues whose streams exist under the Backend's Prefix (core.QueueLister):
// the names of the streams whose subjects fall under "<Prefix>.>" (a stream name listing,
// which the meta leader answers from its assignments without asking each stream's leader:
// cheap on a cluster with many streams), keeping those named "<Prefix>_<q>". The subject
// filter leaves out other prefixes' streams, so the name alone is not ambiguous when prefixes
// and queue names hold '_'. A stream stays after its batches are acked, so every queue
// published to (or fetched from) is listed until its stream is deleted.
func (be *Backend) Queues(ctx context.Context) ([]string, error) {
	if err := be.usable(ctx, "queues", ""); err != nil {
		return nil, err
	}
	cctx, cancel := be.callCtx(ctx)
	defer cancel()
	prefix := be.opts.Prefix + "_"
	var out []string
	lister := be.js.StreamNames(cctx, jetstream.WithStreamListSubject(be.opts.Prefix+".>"))
	for name := range lister.Name() {
		if q, ok := strings.CutPrefix(name, prefix); ok && q != "" {
			out = append(out, q)
		}
	}
	if err := lister.Err(); err != nil {
		return nil, wrap("queues: listing streams", "", err)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

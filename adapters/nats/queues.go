package nats

import (
	"context"
	"slices"
	"strings"

	"github.com/txmq/txmq/core"
)

var _ core.QueueLister = (*Backend)(nil)

// Queues lists the queues whose streams exist under the Backend's Prefix (core.QueueLister):
// a stream listing, keeping the streams named "<Prefix>_<q>" whose one subject is
// "<Prefix>.<q>.>" (the name alone is ambiguous when prefixes and queue names hold '_'). A
// stream stays after its batches are acked, so every queue published to (or fetched from) is
// listed until its stream is deleted.
func (be *Backend) Queues(ctx context.Context) ([]string, error) {
	if err := be.usable(ctx, "queues", ""); err != nil {
		return nil, err
	}
	cctx, cancel := be.callCtx(ctx)
	defer cancel()
	head := be.opts.Prefix + "."
	var out []string
	lister := be.js.ListStreams(cctx)
	for info := range lister.Info() {
		if len(info.Config.Subjects) != 1 {
			continue
		}
		rest, ok := strings.CutPrefix(info.Config.Subjects[0], head)
		if !ok {
			continue
		}
		name, ok := strings.CutSuffix(rest, ".>")
		if !ok || name == "" || strings.Contains(name, ".") || info.Config.Name != be.opts.Prefix+"_"+name {
			continue
		}
		out = append(out, name)
	}
	if err := lister.Err(); err != nil {
		return nil, wrap("queues: listing streams", "", err)
	}
	slices.Sort(out)
	return slices.Compact(out), nil
}

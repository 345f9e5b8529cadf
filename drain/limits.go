package drain

import "github.com/txmq/txmq/core"

var _ core.SizeLimiter = (*Backend)(nil)

// MaxBatchBytes reports the primary backend's size limit (core.SizeLimiter), where every
// publish goes; 0 when the primary has none.
func (d *Backend) MaxBatchBytes() int {
	if sl, ok := d.primary.(core.SizeLimiter); ok {
		return sl.MaxBatchBytes()
	}
	return 0
}

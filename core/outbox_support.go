package core

// QueueExclusive reports whether name is declared in r and, if so, its Exclusive setting. The
// outbox uses it to store a dead letter with the flag its replay must publish with
// (OutgoingBatch.Exclusive), since DeadLetter does not carry it.
func (r *Registry) QueueExclusive(name string) (exclusive, declared bool) {
	if r == nil {
		return false, false
	}
	spec := r.lookup(name)
	if spec == nil {
		return false, false
	}
	return spec.exclusive, true
}

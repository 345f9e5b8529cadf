package outbox

// SetMaxPending lowers the most rows waiting for s's after-commit publishers.
func SetMaxPending(s *Store, n int) {
	s.ac.mu.Lock()
	s.ac.max = n
	s.ac.mu.Unlock()
}

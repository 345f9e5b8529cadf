package engine

import "sync"

// terminalMemorySize bounds how many terminal batch ids a node remembers.
const terminalMemorySize = 10_000

// terminalMemory is a node's bounded memory of the batches it took down the terminal path
// (dead letter, OnError), by queue and batch id: when such a batch comes back (its Drop failed
// and its lease expired), the node drops it again without a second dead letter or OnError. The
// oldest ids are forgotten first.
type terminalMemory struct {
	mu   sync.Mutex
	set  map[string]struct{}
	ring []string
	next int
}

func terminalKey(queue, id string) string { return queue + "\x00" + id }

// add remembers key.
func (m *terminalMemory) add(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.set == nil {
		m.set = make(map[string]struct{})
		m.ring = make([]string, terminalMemorySize)
	}
	if _, ok := m.set[key]; ok {
		return
	}
	if old := m.ring[m.next]; old != "" {
		delete(m.set, old)
	}
	m.ring[m.next] = key
	m.next = (m.next + 1) % len(m.ring)
	m.set[key] = struct{}{}
}

// seen reports whether key is remembered.
func (m *terminalMemory) seen(key string) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	_, ok := m.set[key]
	return ok
}

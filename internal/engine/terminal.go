package engine

import (
	"strconv"
	"sync"
)

// terminalMemorySize bounds how many terminal batch ids a node remembers.
const terminalMemorySize = 10_000

// terminalMemory is a node's bounded memory of the batches it took down the terminal path
// (dead letter, OnError), by queue, batch id and replay generation: when such a batch comes
// back (its Drop failed and its lease expired), the node drops it again without a second dead
// letter or OnError. A replay of the batch (a higher generation, see envelope.Replays) is not
// the batch coming back: it runs, and when it fails for good it takes the terminal path again.
// The oldest ids are forgotten first.
type terminalMemory struct {
	mu   sync.Mutex
	set  map[string]struct{}
	ring []string
	next int
}

// terminalKey is the memory's key of generation replays of batch id of queue.
func terminalKey(queue, id string, replays int) string {
	return queue + "\x00" + id + "\x00" + strconv.Itoa(replays)
}

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

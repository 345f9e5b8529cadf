package redis

import "sync"

// queueKeys are the Redis names of one queue's state. All share the hash tag {prefix:queue},
// so Redis Cluster keeps them in one slot and every script touches one node.
type queueKeys struct {
	// script holds due, body, lease, dlv, ktail, knext, bkey, hdue, lead and fair in the
	// order the scripts expect (KEYS[1..10]; ktail to hdue serve ordered queues, see
	// ordering.go, lead prioritized ones, see priority.go, and fair fair ones, see fair.go:
	// the scripts derive the names of a fair queue's other keys from it).
	script []string
	// wake is the Pub/Sub channel a publish, retry or freed exclusive lease notifies.
	wake string
	// dedup is script plus the queue's id set (KEYS[11] of publishDedupScript).
	dedup []string
	// unique is script plus the queue's unique key hash and its prune cursor (KEYS[11] and
	// KEYS[12] of publishUniqueScript).
	unique []string
}

// keyCache remembers the queueKeys of each queue name, so the hot path does not rebuild five
// strings per call.
type keyCache struct {
	prefix string
	m      sync.Map // queue name -> *queueKeys
}

// keys returns the names for queue.
func (c *keyCache) keys(queue string) *queueKeys {
	if k, ok := c.m.Load(queue); ok {
		return k.(*queueKeys)
	}
	tag := "{" + c.prefix + ":" + queue + "}"
	k := &queueKeys{
		script: []string{tag + ":due", tag + ":body", tag + ":lease", tag + ":dlv",
			tag + ":ktail", tag + ":knext", tag + ":bkey", tag + ":hdue", tag + ":lead", tag + ":fair"},
		wake: tag + ":wake",
	}
	k.dedup = append(append(make([]string, 0, len(k.script)+1), k.script...), tag+":ids")
	k.unique = append(append(make([]string, 0, len(k.script)+2), k.script...), tag+":uniq", tag+":uniqcur")
	actual, _ := c.m.LoadOrStore(queue, k)
	return actual.(*queueKeys)
}

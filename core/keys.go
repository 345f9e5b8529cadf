package core

// Helpers: what an ordering key may be (see KeyOrderer).

// MaxKeyBytes is the longest ordering key (OutgoingBatch.Key) a publish accepts.
const MaxKeyBytes = 128

// ValidKey reports whether key can be an ordering key: 1 to MaxKeyBytes bytes of printable
// ASCII without spaces (0x21 to 0x7e), the set SQS allows in a MessageGroupId, so that a key
// means the same on every backend. Apps with longer or other keys hash them.
func ValidKey(key string) bool {
	if len(key) == 0 || len(key) > MaxKeyBytes {
		return false
	}
	for i := 0; i < len(key); i++ {
		if key[i] < 0x21 || key[i] > 0x7e {
			return false
		}
	}
	return true
}

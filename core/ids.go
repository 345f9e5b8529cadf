package core

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"sync/atomic"
	"time"
)

// Ids are 26 characters of lowercase base32 (no padding) over 16 bytes: 6 bytes of
// milliseconds since the Unix epoch, 4 random bytes fixed per process, and a 6-byte counter
// that starts at a random value. They sort roughly by creation time, are unique across
// processes with overwhelming probability, and cost no syscall per id.
var (
	idEncoding = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)
	idProcess  [4]byte
	idCounter  atomic.Uint64
)

func init() {
	var seed [8]byte
	_, _ = rand.Read(idProcess[:])
	_, _ = rand.Read(seed[:])
	idCounter.Store(binary.BigEndian.Uint64(seed[:]))
}

// NewID returns a new batch or message id.
func NewID() string { return NewIDAt(time.Now()) }

// NewIDAt is NewID with the time the caller has just read (the id's leading 48 bits are its
// Unix milliseconds): a caller making many ids at once reads the clock once for all of them.
// The ids stay unique within the process whatever t is (a counter follows the time); pass
// the wall clock's time, not a fake clock's, so that ids sort by when they were made.
func NewIDAt(t time.Time) string {
	var b [16]byte
	ms := uint64(t.UnixMilli())
	b[0], b[1], b[2], b[3], b[4], b[5] = byte(ms>>40), byte(ms>>32), byte(ms>>24), byte(ms>>16), byte(ms>>8), byte(ms)
	copy(b[6:10], idProcess[:])
	n := idCounter.Add(1)
	b[10], b[11], b[12], b[13], b[14], b[15] = byte(n>>40), byte(n>>32), byte(n>>24), byte(n>>16), byte(n>>8), byte(n)
	// Encoded into an array on the stack: one allocation (the string), where EncodeToString
	// made two (an id per message and per batch).
	var out [26]byte
	encodeID(&out, &b)
	return string(out[:])
}

// idAlphabet is idEncoding's alphabet.
const idAlphabet = "0123456789abcdefghjkmnpqrstvwxyz"

// encodeID is idEncoding.Encode of 16 bytes, unrolled over two words (the generic encoder
// was about half of NewID's cost): characters 0-11 are the top 60 bits of the first word,
// character 12 its last 4 bits and the top bit of the second, characters 13-24 the second's
// next 60 bits, and character 25 its last 3 bits padded with zeros. No branch per character.
func encodeID(out *[26]byte, b *[16]byte) {
	hi := binary.BigEndian.Uint64(b[0:8])
	lo := binary.BigEndian.Uint64(b[8:16])
	for k := range 12 {
		out[k] = idAlphabet[(hi>>(59-5*k))&31]
	}
	out[12] = idAlphabet[(hi<<1|lo>>63)&31]
	for k := range 12 {
		out[13+k] = idAlphabet[(lo>>(58-5*k))&31]
	}
	out[25] = idAlphabet[(lo&7)<<2]
}

// IDTime returns the time an id made by NewID was made (to the millisecond), and false for a
// string NewID cannot have returned. Any other 26-character id over NewID's alphabet parses
// too, to some time: callers use it as a key to find an id again, not as a fact.
func IDTime(id string) (time.Time, bool) {
	if len(id) != 26 {
		return time.Time{}, false
	}
	var b [16]byte
	if n, err := idEncoding.Decode(b[:], []byte(id)); err != nil || n != 16 {
		return time.Time{}, false
	}
	ms := int64(b[0])<<40 | int64(b[1])<<32 | int64(b[2])<<24 | int64(b[3])<<16 | int64(b[4])<<8 | int64(b[5])
	return time.UnixMilli(ms), true
}

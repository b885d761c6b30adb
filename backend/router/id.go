package router

import (
	"crypto/rand"
	"encoding/base32"
	"encoding/binary"
	"time"
)

// crockford is Crockford's base32 alphabet, lower-cased: ids sort by time
// as strings and read well.
var crockford = base32.NewEncoding("0123456789abcdefghjkmnpqrstvwxyz").WithPadding(base32.NoPadding)

// NewID returns a request id: 48 bits of milliseconds since the epoch then
// 80 random bits (a ULID), so ids sort by start time.
func NewID() string {
	var b [16]byte
	ms := uint64(time.Now().UnixMilli())
	binary.BigEndian.PutUint64(b[:8], ms<<16)
	rand.Read(b[6:])
	return crockford.EncodeToString(b[:])
}

package skills

import (
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"errors"
	"hash/maphash"
	"sync"
)

// cursorKind tells which tool issued a cursor.
type cursorKind byte

const (
	cursorList cursorKind = 'L'
	cursorRead cursorKind = 'R'
)

const (
	cursorVersion    = 1
	cursorPayloadLen = 1 + 1 + 8 + 8 + 8 // version, kind, offset, binding, version stamp
	cursorMACLen     = 16
)

// cursorLen is the length of every encoded cursor; read pages budget for
// it exactly.
var cursorLen = base64.RawURLEncoding.EncodedLen(cursorPayloadLen + cursorMACLen)

// cursor is the decoded content of an opaque continuation cursor.
type cursor struct {
	kind cursorKind
	// offset is the index of the next skill (list) or the byte offset of the
	// next piece (read).
	offset uint64
	// binding ties a read cursor to its authority, package and resource, and
	// a list cursor to the listing it pages through.
	binding uint64
	// stamp is a fingerprint of the resource contents (read) or the listing
	// (list) the cursor was issued for, so a change is detected as stale.
	stamp uint64
}

// Cursor decoding failures.
var (
	errCursorInvalid = errors.New("cursor is malformed, forged or from another server process")
	errCursorKind    = errors.New("cursor was issued by the other skills tool")
)

// cursorCodec signs and verifies cursors with a random key, so cursors are
// opaque and tamper-evident. Catalogs use processCodec: one key per process,
// so cursors survive a catalog rebuilt on a configuration reload and expire
// with a restart.
type cursorCodec struct {
	key  []byte
	seed maphash.Seed
}

// processCodec is the codec of every Catalog in this process.
var processCodec = sync.OnceValue(newCursorCodec)

func newCursorCodec() cursorCodec {
	key := make([]byte, 32)
	// crypto/rand.Read never fails on supported platforms (it panics
	// instead), so its error is not checked.
	_, _ = rand.Read(key)
	return cursorCodec{key: key, seed: maphash.MakeSeed()}
}

// encode returns the opaque text of c.
func (k cursorCodec) encode(c cursor) string {
	buf := make([]byte, cursorPayloadLen, cursorPayloadLen+sha256.Size)
	buf[0] = cursorVersion
	buf[1] = byte(c.kind)
	binary.BigEndian.PutUint64(buf[2:], c.offset)
	binary.BigEndian.PutUint64(buf[10:], c.binding)
	binary.BigEndian.PutUint64(buf[18:], c.stamp)
	mac := hmac.New(sha256.New, k.key)
	mac.Write(buf)
	buf = mac.Sum(buf)[:cursorPayloadLen+cursorMACLen]
	return base64.RawURLEncoding.EncodeToString(buf)
}

// decode verifies s and returns its content; want is the kind the calling
// tool accepts.
func (k cursorCodec) decode(s string, want cursorKind) (cursor, error) {
	if len(s) != cursorLen {
		return cursor{}, errCursorInvalid
	}
	buf, err := base64.RawURLEncoding.Strict().DecodeString(s)
	if err != nil || len(buf) != cursorPayloadLen+cursorMACLen {
		return cursor{}, errCursorInvalid
	}
	mac := hmac.New(sha256.New, k.key)
	mac.Write(buf[:cursorPayloadLen])
	if !hmac.Equal(mac.Sum(nil)[:cursorMACLen], buf[cursorPayloadLen:]) {
		return cursor{}, errCursorInvalid
	}
	if buf[0] != cursorVersion {
		return cursor{}, errCursorInvalid
	}
	c := cursor{
		kind:    cursorKind(buf[1]),
		offset:  binary.BigEndian.Uint64(buf[2:]),
		binding: binary.BigEndian.Uint64(buf[10:]),
		stamp:   binary.BigEndian.Uint64(buf[18:]),
	}
	if c.kind != want {
		return cursor{}, errCursorKind
	}
	return c, nil
}

// hashStrings fingerprints a sequence of strings (length-prefixed, so
// ("ab","c") and ("a","bc") differ) with the codec's per-process seed.
func (k cursorCodec) hashStrings(parts ...string) uint64 {
	var h maphash.Hash
	h.SetSeed(k.seed)
	var n [8]byte
	for _, p := range parts {
		binary.LittleEndian.PutUint64(n[:], uint64(len(p)))
		h.Write(n[:])
		h.WriteString(p)
	}
	return h.Sum64()
}

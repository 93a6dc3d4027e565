package store

import (
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"hash/crc32"

	"github.com/appserver/appserver/internal/apperr"
)

// Cursor is a keyset position: the sort value and id of the last row a page
// returned, bound to the listing it came from.
type Cursor struct {
	// Scope names the listing, e.g. "threads/created_at" or "items/<thread>",
	// so that a cursor is refused by any other listing.
	Scope string `json:"s"`
	// Value is the sort value: microseconds since the epoch or a Seq.
	Value int64 `json:"v"`
	// ID breaks ties between equal sort values.
	ID string `json:"i,omitempty"`
	// Incl makes the page start at the row of Value itself rather than
	// after it, in either direction: a cursor that points at a row (see
	// TurnCursor) rather than ending a page.
	Incl bool `json:"n,omitempty"`
}

// TurnsScope is the cursor scope of a thread's turn listing.
func TurnsScope(threadID string) string { return "turns/" + threadID }

// ItemsScope is the cursor scope of a thread's item listing.
func ItemsScope(threadID string) string { return "items/" + threadID }

// TurnCursor is the ListTurns cursor whose page starts at the turn of
// sequence number seq (included), in either direction.
func TurnCursor(threadID string, seq int64) string {
	return Cursor{Scope: TurnsScope(threadID), Value: seq, Incl: true}.Encode()
}

// cursorKey salts the checksum so that a cursor of another system, or a
// hand-edited one, is refused rather than misread.
const cursorKey = "appserver/store/cursor/v1"

// Encode returns c as an opaque URL-safe string.
func (c Cursor) Encode() string {
	payload, _ := json.Marshal(c) // cannot fail: strings and an int
	buf := binary.BigEndian.AppendUint32(payload, checksum(payload))
	return base64.RawURLEncoding.EncodeToString(buf)
}

// DecodeCursor parses s, which must come from Encode for the same scope; any
// other string is an apperr.Invalid "invalid cursor: <s>".
func DecodeCursor(s, scope string) (Cursor, error) {
	bad := apperr.New(apperr.Invalid, "invalid cursor: %s", s)
	buf, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil || len(buf) < 5 {
		return Cursor{}, bad
	}
	payload, sum := buf[:len(buf)-4], binary.BigEndian.Uint32(buf[len(buf)-4:])
	if checksum(payload) != sum {
		return Cursor{}, bad
	}
	var c Cursor
	if err := json.Unmarshal(payload, &c); err != nil || c.Scope != scope {
		return Cursor{}, bad
	}
	return c, nil
}

func checksum(payload []byte) uint32 {
	h := crc32.NewIEEE()
	h.Write([]byte(cursorKey))
	h.Write(payload)
	return h.Sum32()
}

// ItemCursor is the ListItems cursor whose page starts at the item of
// sequence number seq (included), in either direction.
func ItemCursor(threadID string, seq int64) string {
	return Cursor{Scope: ItemsScope(threadID), Value: seq, Incl: true}.Encode()
}

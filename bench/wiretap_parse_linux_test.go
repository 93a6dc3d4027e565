//go:build linux

package bench

import (
	"context"
	"encoding/binary"
	"errors"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

const (
	tapDaemon = 4000
	tapFake   = 5000
)

// tapConn is one direction of a TCP connection for feeding a wireTap's
// parser segments as the kernel delivers them, sequence numbers included.
type tapConn struct {
	t        *testing.T
	tap      *wireTap
	src, dst uint16
	seq      uint32
}

var tapT0 = time.Unix(1000, 0)

func tapAt(us int) time.Time { return tapT0.Add(time.Duration(us) * time.Microsecond) }

// open sends the connection's SYN.
func openTapConn(t *testing.T, tap *wireTap, src, dst uint16, isn uint32) *tapConn {
	c := &tapConn{t: t, tap: tap, src: src, dst: dst, seq: isn}
	if err := tap.packet(segment(src, dst, isn, true, nil), tapAt(0)); err != nil {
		t.Fatal(err)
	}
	c.seq++
	return c
}

func (c *tapConn) sendErr(payload string, us int) error {
	err := c.tap.packet(segment(c.src, c.dst, c.seq, false, []byte(payload)), tapAt(us))
	c.seq += uint32(len(payload))
	return err
}

func (c *tapConn) send(payload string, us int) {
	c.t.Helper()
	if err := c.sendErr(payload, us); err != nil {
		c.t.Fatalf("segment %d→%d %.60q: %v", c.src, c.dst, payload, err)
	}
}

// upgrade opens a websocket connection from client port p.
func upgrade(t *testing.T, tap *wireTap, p uint16) (up, down *tapConn) {
	up, down = openTapConn(t, tap, p, tapDaemon, 100), openTapConn(t, tap, tapDaemon, p, 9000)
	up.send("GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n", 1)
	down.send("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 2)
	return up, down
}

func modelRequest(body string) string {
	return "POST /v1/responses HTTP/1.1\r\nContent-Type: application/json\r\ncontent-length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

func outputRequest(callID string) string {
	return modelRequest(`{"model":"fake","input":[{"type":"function_call","call_id":"` + callID + `"},{"type":"function_call_output","call_id":"` + callID + `","output":"Sunny"}]}`)
}

func responseWithCall(callID string) string {
	return "HTTP/1.1 200 OK\r\n\r\nevent: response.output_item.added\ndata: " + `{"item":{"type":"function_call","call_id":"` + callID + `"}}` + "\n\n"
}

// TestWireTapParse feeds the tap's parser a call's traffic split anywhere:
// plain HTTP on the daemon's port, a connection opened before the tap,
// masked client frames with 7-, 16- and 64-bit lengths, a control frame,
// pipelined model requests, a retransmission, and a reused port pair.
func TestWireTapParse(t *testing.T) {
	tap := newWireTap(tapDaemon, tapFake)
	up, down := upgrade(t, tap, 40001)
	scrapeUp, scrapeDown := openTapConn(t, tap, 40002, tapDaemon, 5), openTapConn(t, tap, tapDaemon, 40002, 7)
	scrapeUp.send("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 3)
	scrapeDown.send("HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n\x81\x7f\x00\x00\x00", 4)
	// A connection the tap did not see open is not read, whatever it carries.
	stale := &tapConn{t: t, tap: tap, src: 40009, dst: tapDaemon, seq: 77}
	stale.send("\x81\x05hello", 5)

	modelDown := openTapConn(t, tap, tapFake, 40003, 1)
	modelUp := openTapConn(t, tap, 40003, tapFake, 1)
	resp := responseWithCall("w0t1_c1")
	cut := strings.Index(resp, "w0t1_c1") + 3
	modelDown.send(resp[:cut], 100)
	modelDown.send(resp[cut:], 110) // the id completes here

	// A large notification (64-bit length) split in three, a ping, then the
	// call (16-bit length) whose last bytes come separately.
	big := wsFrame(`{"method":"item/started","params":{"text":"`+strings.Repeat("x", 70000)+`"}}`, nil)
	call := wsFrame(`{"id":7,"method":"item/tool/call","params":{"callId":"w0t1_c1","tool":"lookup_weather","arguments":{"city":"`+strings.Repeat("P", 150)+`"}}}`, nil)
	ping := []byte{0x89, 0x00}
	down.send(string(big[:30000]), 120)
	down.send(string(big[30000:60000]), 125)
	down.send(string(big[60000:])+string(ping)+string(call[:5]), 150)
	down.send(string(call[5:]), 180)

	up.send(string(wsFrame(`{"id":7,"result":{"contentItems":[],"success":true}}`, []byte{1, 2, 3, 4})), 500)

	// A request without a call output and the one with it, pipelined; the
	// second one's body ends in the next segment, which is then
	// retransmitted.
	first := modelRequest(`{"model":"fake","input":[{"type":"message","role":"user","content":[]}]}`)
	second := outputRequest("w0t1_c1")
	modelUp.send(first+second[:len(second)-10], 550)
	tail := second[len(second)-10:]
	modelUp.send(tail, 570)
	modelUp.seq -= uint32(len(tail))
	modelUp.send(tail, 900)

	o, err := tap.tryOverheads(map[string][2]time.Time{"w0t1_c1": {}})
	if err != nil {
		t.Fatal(err)
	}
	if in, out := o.inbound[0], o.outbound[0]; in != 70*time.Microsecond || out != 70*time.Microsecond {
		t.Fatalf("inbound %v, outbound %v; want 70µs each", in, out)
	}
	if _, err := tap.tryOverheads(map[string][2]time.Time{"w0t1_c2": {}}); err == nil {
		t.Fatal("a call the tap never saw was accepted")
	}

	// The client's port pair is used again by a new connection: its
	// upgrade is read from scratch.
	up2, down2 := upgrade(t, tap, 40001)
	modelDown.send(responseWithCall("w0t1_c2"), 1000)
	down2.send(string(wsFrame(`{"id":7,"method":"item/tool/call","params":{"callId":"w0t1_c2"}}`, nil)), 1010)
	up2.send(string(wsFrame(`{"id":7,"result":{}}`, []byte{9, 9, 9, 9})), 1100)
	modelUp.send(outputRequest("w0t1_c2"), 1120)
	if _, err := tap.tryOverheads(map[string][2]time.Time{"w0t1_c2": {}}); err != nil {
		t.Fatal(err)
	}
}

// TestWireTapRejects checks that what the tap cannot follow fails the run
// instead of losing or misplacing a call.
func TestWireTapRejects(t *testing.T) {
	for name, feed := range map[string]func(up, down *tapConn) error{
		"unmasked client frame": func(up, _ *tapConn) error { return up.sendErr(string(wsFrame(`{}`, nil)), 10) },
		"masked server frame":   func(_, down *tapConn) error { return down.sendErr(string(wsFrame(`{}`, []byte{1, 2, 3, 4})), 10) },
		"gap in a stream": func(_, down *tapConn) error {
			down.seq += 100
			return down.sendErr(string(wsFrame(`{}`, nil)), 10)
		},
		"fragmented message": func(_, down *tapConn) error { return down.sendErr("\x01\x02{}", 10) },
		"compressed frame":   func(_, down *tapConn) error { return down.sendErr("\xc1\x02{}", 10) },
		"huge frame":         func(_, down *tapConn) error { return down.sendErr("\x81\x7f\xff\xff\xff\xff\xff\xff\xff\xfa", 10) },
	} {
		t.Run(name, func(t *testing.T) {
			up, down := upgrade(t, newWireTap(tapDaemon, tapFake), 40001)
			if err := feed(up, down); err == nil {
				t.Fatal("accepted")
			}
		})
	}
	t.Run("chunked model request", func(t *testing.T) {
		tap := newWireTap(tapDaemon, tapFake)
		c := openTapConn(t, tap, 40003, tapFake, 1)
		if err := c.sendErr("POST /v1/responses HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n", 10); err == nil {
			t.Fatal("accepted")
		}
	})
	t.Run("answer before the call", func(t *testing.T) {
		tap := newWireTap(tapDaemon, tapFake)
		tap.respIn["c"], tap.callOut["c"], tap.answerIn["c"], tap.reqOut["c"] = tapAt(1), tapAt(10), tapAt(5), tapAt(20)
		if _, err := tap.tryOverheads(map[string][2]time.Time{"c": {}}); err == nil {
			t.Fatal("accepted")
		}
	})
}

// TestWireTapLive runs a few dynamic tool calls through the daemon with
// the tap open, so that the socket filter and the framing are checked
// against the real traffic: every call is seen whole, and each wire stamp
// precedes the benchmark clock read when the same bytes reached the other
// end. It needs a packet socket (root or CAP_NET_RAW), which only the
// benchmark uses.
func TestWireTapLive(t *testing.T) {
	fake, err := startDynFake()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(fake.close)
	d := startDaemon(t, "--data-dir", t.TempDir(),
		"-c", `model="fake"`, "-c", `model_provider="fake"`,
		"-c", `model_providers.fake={name="Fake", base_url="`+fake.url()+`", wire_api="responses", request_max_retries=0}`)
	tap, err := startWireTap(strings.TrimPrefix(d.ws, "ws://"), fake.ln.Addr().String())
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) || errors.Is(err, syscall.EAFNOSUPPORT) {
		t.Skipf("no packet socket here (it needs CAP_NET_RAW): %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = tap.close() }()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	pool, err := newDynPool(ctx, d.ws, 1, false)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.close()
	times := newDynClientTimes(2 * dynCallsPerTurn)
	if err := pool.run(ctx, 2*dynCallsPerTurn, times); err != nil {
		t.Fatalf("%v\ndaemon stderr:\n%s", err, d.stderr)
	}
	times.mu.Lock()
	defer times.mu.Unlock()
	o, err := tap.overheads(times.m)
	if err != nil {
		t.Fatal(err)
	}
	if len(o.total) != 2*dynCallsPerTurn {
		t.Fatalf("wire overheads of %d calls, want %d", len(o.total), 2*dynCallsPerTurn)
	}
	fake.mu.Lock()
	defer fake.mu.Unlock()
	for id, c := range times.m {
		ri, co, ai, ro, _ := tap.stamps(id)
		for _, p := range []struct {
			what      string
			wire, app time.Time
		}{
			{"model response / fake's write returned", ri, fake.sent[id]},
			{"item/tool/call / client's read returned", co, c[0]},
			{"answer / client's write returned", ai, c[1]},
			{"model request / fake's read returned", ro, fake.arrived[id]},
		} {
			if p.wire.After(p.app) {
				t.Errorf("call %s: %s: the wire stamp %v is after the benchmark's clock %v", id, p.what, p.wire, p.app)
			}
		}
	}
	if err := tap.close(); err != nil {
		t.Fatal(err)
	}
}

// segment frames payload as loopback delivers a TCP segment: an Ethernet
// header, IPv4 and TCP headers without options, 127.0.0.1 both ends.
func segment(src, dst uint16, seq uint32, syn bool, payload []byte) []byte {
	p := make([]byte, 14+20+20, 14+20+20+len(payload))
	binary.BigEndian.PutUint16(p[12:], 0x0800)
	ip := p[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+20+len(payload)))
	ip[9] = syscall.IPPROTO_TCP
	copy(ip[12:], []byte{127, 0, 0, 1})
	copy(ip[16:], []byte{127, 0, 0, 1})
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], src)
	binary.BigEndian.PutUint16(tcp[2:], dst)
	binary.BigEndian.PutUint32(tcp[4:], seq)
	tcp[12] = 5 << 4
	if syn {
		tcp[13] = 0x02
	}
	return append(p, payload...)
}

// wsFrame is one final text frame, masked with key when it is set.
func wsFrame(text string, key []byte) []byte {
	f := []byte{0x81}
	n := len(text)
	mask := byte(0)
	if key != nil {
		mask = 0x80
	}
	switch {
	case n < 126:
		f = append(f, mask|byte(n))
	case n < 1<<16:
		f = append(f, mask|126, byte(n>>8), byte(n))
	default:
		f = append(f, mask|127)
		f = binary.BigEndian.AppendUint64(f, uint64(n))
	}
	f = append(f, key...)
	for i := range len(text) {
		f = append(f, text[i]^keyByte(key, i))
	}
	return f
}

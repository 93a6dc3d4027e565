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

// TestWireTapParse feeds the tap's parser segments as the kernel delivers
// them: streams split anywhere, plain HTTP on the daemon's port, masked
// client frames, and a model request whose body arrives in two parts.
func TestWireTapParse(t *testing.T) {
	const daemon, fake, client, scrape, modelConn = 4000, 5000, 40001, 40002, 40003
	tap := &wireTap{daemonPort: daemon, fakePort: fake, flows: map[wireFlow]*wireStream{}, reqCalls: map[string]string{},
		respIn: map[string]time.Time{}, callOut: map[string]time.Time{}, answerIn: map[string]time.Time{}, reqOut: map[string]time.Time{}}
	t0 := time.Unix(1000, 0)
	at := func(us int) time.Time { return t0.Add(time.Duration(us) * time.Microsecond) }
	feed := func(src, dst uint16, payload string, us int) {
		t.Helper()
		if err := tap.packet(segment(src, dst, []byte(payload)), at(us)); err != nil {
			t.Fatalf("segment %d→%d %q: %v", src, dst, payload, err)
		}
	}

	feed(client, daemon, "GET / HTTP/1.1\r\nHost: x\r\nUpgrade: websocket\r\n\r\n", 1)
	feed(daemon, client, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n", 2)
	feed(scrape, daemon, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", 3)
	feed(daemon, scrape, "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\n\x81\x7f\x00\x00\x00", 4)

	resp := `event: response.output_item.added` + "\ndata: " + `{"item":{"type":"function_call","call_id":"w0t1_c1"}}` + "\n\n"
	cut := strings.Index(resp, "w0t1_c1") + 3
	feed(fake, modelConn, "HTTP/1.1 200 OK\r\n\r\n"+resp[:cut], 100)
	feed(fake, modelConn, resp[cut:], 110) // the id completes here

	started := wsFrame(`{"method":"item/started","params":{"item":{"type":"dynamicToolCall"}}}`, nil)
	call := wsFrame(`{"id":7,"method":"item/tool/call","params":{"callId":"w0t1_c1","tool":"lookup_weather"}}`, nil)
	feed(daemon, client, string(started)+string(call[:5]), 150)
	feed(daemon, client, string(call[5:]), 180)

	answer := wsFrame(`{"id":7,"result":{"contentItems":[],"success":true}}`, []byte{1, 2, 3, 4})
	feed(client, daemon, string(answer), 500)

	body := `{"model":"fake","input":[{"type":"function_call","call_id":"w0t1_c1"},{"type":"function_call_output","call_id":"w0t1_c1","output":"Sunny"}]}`
	req := "POST /v1/responses HTTP/1.1\r\nContent-Type: application/json\r\ncontent-length: " + strconv.Itoa(len(body)) + "\r\n\r\n"
	feed(modelConn, fake, req+body[:40], 550)
	feed(modelConn, fake, body[40:], 570)

	o, err := tap.overheads(map[string][2]time.Time{"w0t1_c1": {}})
	if err != nil {
		t.Fatal(err)
	}
	if in, out := o.inbound[0], o.outbound[0]; in != 70*time.Microsecond || out != 70*time.Microsecond {
		t.Fatalf("inbound %v, outbound %v; want 70µs each", in, out)
	}
	if _, err := tap.tryOverheads(map[string][2]time.Time{"w0t1_c2": {}}); err == nil {
		t.Fatal("a call the tap never saw was accepted")
	}
	if err := tap.packet(segment(client, daemon, wsFrame(`{}`, nil)), at(600)); err == nil {
		t.Fatal("an unmasked client frame was accepted")
	}
}

// TestWireTapLive runs a few dynamic tool calls through the daemon with
// the tap open, so that the socket filter and the framing are checked
// against the real traffic. It needs a packet socket (root or
// CAP_NET_RAW), which only the benchmark uses.
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
	if errors.Is(err, syscall.EPERM) || errors.Is(err, syscall.EACCES) {
		t.Skipf("no packet socket without CAP_NET_RAW: %v", err)
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
	o, err := tap.overheads(times.m)
	times.mu.Unlock()
	if err != nil {
		t.Fatal(err)
	}
	if len(o.total) != 2*dynCallsPerTurn || o.total[0] <= 0 {
		t.Fatalf("wire overheads %v", o.total)
	}
	if err := tap.close(); err != nil {
		t.Fatal(err)
	}
}

// segment frames payload as loopback delivers a TCP segment: an Ethernet
// header, IPv4 and TCP headers without options.
func segment(src, dst uint16, payload []byte) []byte {
	p := make([]byte, 14+20+20, 14+20+20+len(payload))
	binary.BigEndian.PutUint16(p[12:], 0x0800)
	ip := p[14:]
	ip[0] = 0x45
	binary.BigEndian.PutUint16(ip[2:], uint16(20+20+len(payload)))
	ip[9] = syscall.IPPROTO_TCP
	tcp := ip[20:]
	binary.BigEndian.PutUint16(tcp[0:], src)
	binary.BigEndian.PutUint16(tcp[2:], dst)
	tcp[12] = 5 << 4
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
	default:
		f = append(f, mask|126, byte(n>>8), byte(n))
	}
	f = append(f, key...)
	for i := range len(text) {
		f = append(f, text[i]^keyByte(key, i))
	}
	return f
}

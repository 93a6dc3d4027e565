//go:build linux

package bench

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"syscall"
	"time"
	"unsafe"
)

// wireTap timestamps the dynamic tool benchmark's traffic where the issue
// defines the overhead: on the wire, at the daemon's sockets. It reads
// the loopback interface through a packet socket (root or CAP_NET_RAW),
// reassembles the TCP streams to and from two ports (the daemon's and the
// fake model's) of the connections it saw open, and records per call id,
// with the kernel's receive timestamps:
//
//	respIn   the model's response carrying the call reached the daemon
//	callOut  the item/tool/call request left the daemon
//	answerIn the client's answer reached the daemon
//	reqOut   the last byte of the next model request, the one carrying the
//	         call's function_call_output, left the daemon
//
// overhead = (callOut − respIn) + (reqOut − answerIn). Unlike the
// harness's own clocks, this leaves out when the benchmark process's
// goroutines (the fake model and the client) got to run. Anything it
// cannot follow (a dropped packet, a gap in a stream, a fragmented or
// compressed websocket message) fails the run rather than losing a call.
type wireTap struct {
	fd                   int
	daemonPort, fakePort uint16
	closeOnce            sync.Once
	stop                 chan struct{}
	done                 chan struct{}

	mu       sync.Mutex
	err      error
	flows    map[wireFlow]*wireStream
	reqCalls map[wireCallKey]string // item/tool/call request → call id
	respIn   map[string]time.Time
	callOut  map[string]time.Time
	answerIn map[string]time.Time
	reqOut   map[string]time.Time
}

// wireFlow is one direction of a TCP connection.
type wireFlow struct {
	srcIP, dstIP     [4]byte
	srcPort, dstPort uint16
}

func (f wireFlow) reverse() wireFlow {
	return wireFlow{srcIP: f.dstIP, dstIP: f.srcIP, srcPort: f.dstPort, dstPort: f.srcPort}
}

func (f wireFlow) String() string {
	return fmt.Sprintf("%v:%d→%v:%d", net.IP(f.srcIP[:]), f.srcPort, net.IP(f.dstIP[:]), f.dstPort)
}

// wireCallKey names a server→client request: the flow it went out on and
// its JSON-RPC id.
type wireCallKey struct {
	flow wireFlow
	id   string
}

// wireStream is one direction of one TCP connection: the next sequence
// number expected and the bytes not yet parsed.
type wireStream struct {
	next      uint32
	buf       []byte
	handshake bool // the HTTP upgrade has been skipped (websocket flows)
	other     bool // not followed: opened before the tap, or not a websocket
}

// wireMaxFrame bounds a websocket frame the tap will buffer.
const wireMaxFrame = 64 << 20

// startWireTap opens the packet socket; the error says why it cannot
// (usually: not root).
func startWireTap(daemonAddr, fakeAddr string) (*wireTap, error) {
	dp, err := portOf(daemonAddr)
	if err != nil {
		return nil, err
	}
	fp, err := portOf(fakeAddr)
	if err != nil {
		return nil, err
	}
	lo, err := loopbackIndex()
	if err != nil {
		return nil, err
	}
	// Protocol 0: the socket receives nothing until it is bound, by which
	// time the filter and the timestamps are in place.
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	t := newWireTap(dp, fp)
	t.fd = fd
	setup := func() error {
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1); err != nil {
			return fmt.Errorf("timestamps: %w", err)
		}
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 32<<20); err != nil {
			// Without CAP_NET_ADMIN the buffer is capped at rmem_max; the
			// drop count checked by close tells if that was too small.
			_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 32<<20)
		}
		tv := syscall.NsecToTimeval(int64(50 * time.Millisecond))
		if err := syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv); err != nil {
			return fmt.Errorf("receive timeout: %w", err)
		}
		// Only received (not the outgoing copy loopback also shows) IPv4
		// TCP segments to or from one of the two ports that carry a
		// payload or open a connection.
		if err := syscall.AttachLsf(fd, wireFilter(dp, fp)); err != nil {
			return fmt.Errorf("attach filter: %w", err)
		}
		if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_ALL), Ifindex: lo}); err != nil {
			return fmt.Errorf("bind to loopback: %w", err)
		}
		return nil
	}
	if err := setup(); err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	go t.read()
	return t, nil
}

// newWireTap is a tap's parsing state, with no socket.
func newWireTap(daemonPort, fakePort uint16) *wireTap {
	return &wireTap{
		fd: -1, daemonPort: daemonPort, fakePort: fakePort,
		stop: make(chan struct{}), done: make(chan struct{}),
		flows:    map[wireFlow]*wireStream{},
		reqCalls: map[wireCallKey]string{},
		respIn:   map[string]time.Time{}, callOut: map[string]time.Time{},
		answerIn: map[string]time.Time{}, reqOut: map[string]time.Time{},
	}
}

func portOf(addr string) (uint16, error) {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		return 0, err
	}
	n, err := strconv.ParseUint(p, 10, 16)
	return uint16(n), err
}

func loopbackIndex() (int, error) {
	ifs, err := net.Interfaces()
	if err != nil {
		return 0, err
	}
	for _, i := range ifs {
		if i.Flags&net.FlagLoopback != 0 {
			return i.Index, nil
		}
	}
	return 0, errors.New("no loopback interface")
}

func htons(v uint16) uint16 { return v<<8 | v>>8 }

// bpfOp is one instruction of a filter before assembly: jt and jf name
// labels ("" is the next instruction).
type bpfOp struct {
	label  string
	code   uint16
	k      uint32
	jt, jf string
}

// assembleBPF resolves the labels of ops into jump offsets.
func assembleBPF(ops []bpfOp) []syscall.SockFilter {
	at := map[string]int{}
	for i, op := range ops {
		if op.label != "" {
			at[op.label] = i
		}
	}
	off := func(i int, label string) uint8 {
		if label == "" {
			return 0
		}
		j, ok := at[label]
		if !ok || j <= i || j-i-1 > 255 {
			panic(fmt.Sprintf("bpf: bad jump from %d to %q", i, label))
		}
		return uint8(j - i - 1)
	}
	out := make([]syscall.SockFilter, len(ops))
	for i, op := range ops {
		out[i] = syscall.SockFilter{Code: op.code, K: op.k, Jt: off(i, op.jt), Jf: off(i, op.jf)}
	}
	return out
}

// wireFilter is a classic BPF program over an Ethernet-framed packet
// (loopback's framing): accept a received IPv4 TCP segment whose source or
// destination port is a or b and which carries a payload or a SYN.
func wireFilter(a, b uint16) []syscall.SockFilter {
	const (
		ldAbsH  = syscall.BPF_LD | syscall.BPF_H | syscall.BPF_ABS
		ldAbsB  = syscall.BPF_LD | syscall.BPF_B | syscall.BPF_ABS
		ldAbsW  = syscall.BPF_LD | syscall.BPF_W | syscall.BPF_ABS
		ldIndH  = syscall.BPF_LD | syscall.BPF_H | syscall.BPF_IND
		ldIndB  = syscall.BPF_LD | syscall.BPF_B | syscall.BPF_IND
		ldxMSH  = syscall.BPF_LDX | syscall.BPF_B | syscall.BPF_MSH
		jeq     = syscall.BPF_JMP | syscall.BPF_JEQ | syscall.BPF_K
		jgt     = syscall.BPF_JMP | syscall.BPF_JGT | syscall.BPF_K
		jset    = syscall.BPF_JMP | syscall.BPF_JSET | syscall.BPF_K
		ret     = syscall.BPF_RET | syscall.BPF_K
		rsh     = syscall.BPF_ALU | syscall.BPF_RSH | syscall.BPF_K
		lsh     = syscall.BPF_ALU | syscall.BPF_LSH | syscall.BPF_K
		subX    = syscall.BPF_ALU | syscall.BPF_SUB | syscall.BPF_X
		st      = syscall.BPF_ST
		ldxMem  = syscall.BPF_LDX | syscall.BPF_MEM
		skfAD   = 0xfffff000 // SKF_AD_OFF
		pktType = 4          // SKF_AD_PKTTYPE
	)
	return assembleBPF([]bpfOp{
		{code: ldAbsW, k: skfAD + pktType},
		{code: jeq, k: syscall.PACKET_HOST, jf: "drop"},
		{code: ldAbsH, k: 12}, // ethertype
		{code: jeq, k: 0x0800, jf: "drop"},
		{code: ldAbsB, k: 23}, // IP protocol
		{code: jeq, k: syscall.IPPROTO_TCP, jf: "drop"},
		{code: ldxMSH, k: 14}, // X = IP header length
		{code: ldIndH, k: 14}, // source port
		{code: jeq, k: uint32(a), jt: "port"},
		{code: jeq, k: uint32(b), jt: "port"},
		{code: ldIndH, k: 16}, // destination port
		{code: jeq, k: uint32(a), jt: "port"},
		{code: jeq, k: uint32(b), jt: "port", jf: "drop"},
		{label: "port", code: ldIndB, k: 27}, // TCP flags
		{code: jset, k: 0x02, jt: "accept"},  // SYN
		{code: ldIndB, k: 26},                // TCP data offset
		{code: rsh, k: 4},
		{code: lsh, k: 2},
		{code: st, k: 0},      // M[0] = TCP header length
		{code: ldAbsH, k: 16}, // IP total length
		{code: subX},          // minus the IP header
		{code: ldxMem, k: 0},
		{code: subX}, // minus the TCP header
		{code: jgt, k: 0, jt: "accept", jf: "drop"},
		{label: "accept", code: ret, k: 1 << 18},
		{label: "drop", code: ret, k: 0},
	})
}

// close stops the reader and reports what went wrong while reading,
// packets the kernel dropped included.
func (t *wireTap) close() error {
	t.closeOnce.Do(func() {
		close(t.stop)
		<-t.done
		if drops, err := packetDrops(t.fd); err != nil {
			t.fail(err)
		} else if drops > 0 {
			t.fail(fmt.Errorf("the tap's socket dropped %d packets", drops))
		}
		_ = syscall.Close(t.fd)
	})
	return t.readErr()
}

// packetDrops reads the socket's PACKET_STATISTICS drop count.
func packetDrops(fd int) (uint32, error) {
	const packetStatistics = 6 // PACKET_STATISTICS
	var st struct{ packets, drops uint32 }
	n := uint32(unsafe.Sizeof(st))
	_, _, e := syscall.Syscall6(syscall.SYS_GETSOCKOPT, uintptr(fd), syscall.SOL_PACKET, packetStatistics,
		uintptr(unsafe.Pointer(&st)), uintptr(unsafe.Pointer(&n)), 0)
	if e != 0 {
		return 0, fmt.Errorf("packet statistics: %w", e)
	}
	return st.drops, nil
}

func (t *wireTap) read() {
	defer close(t.done)
	buf := make([]byte, 1<<18)
	oob := make([]byte, syscall.CmsgSpace(int(unsafe.Sizeof(syscall.Timespec{}))))
	for {
		select {
		case <-t.stop:
			return
		default:
		}
		n, oobn, flags, from, err := syscall.Recvmsg(t.fd, buf, oob, 0)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
				continue
			}
			t.fail(fmt.Errorf("read packet: %w", err))
			return
		}
		if flags&syscall.MSG_TRUNC != 0 {
			t.fail(fmt.Errorf("a packet longer than %d bytes", len(buf)))
			return
		}
		if ll, ok := from.(*syscall.SockaddrLinklayer); !ok || ll.Pkttype != syscall.PACKET_HOST {
			continue // the filter already drops these
		}
		ts, err := packetTime(oob[:oobn])
		if err != nil {
			t.fail(err)
			return
		}
		if err := t.packet(buf[:n], ts); err != nil {
			t.fail(err)
			return
		}
	}
}

func (t *wireTap) fail(err error) {
	t.mu.Lock()
	if t.err == nil {
		t.err = err
	}
	t.mu.Unlock()
}

func packetTime(oob []byte) (time.Time, error) {
	msgs, err := syscall.ParseSocketControlMessage(oob)
	if err != nil {
		return time.Time{}, err
	}
	for _, m := range msgs {
		if m.Header.Level == syscall.SOL_SOCKET && m.Header.Type == syscall.SO_TIMESTAMPNS && len(m.Data) >= int(unsafe.Sizeof(syscall.Timespec{})) {
			ts := (*syscall.Timespec)(unsafe.Pointer(&m.Data[0]))
			return time.Unix(ts.Unix()), nil
		}
	}
	return time.Time{}, errors.New("packet without a timestamp")
}

// packet handles one Ethernet-framed IPv4 TCP segment the filter passed.
func (t *wireTap) packet(p []byte, ts time.Time) error {
	if len(p) < 14+20 || binary.BigEndian.Uint16(p[12:14]) != 0x0800 {
		return nil
	}
	ip := p[14:]
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if ip[9] != syscall.IPPROTO_TCP || total > len(ip) || ihl < 20 || total < ihl+20 {
		return nil
	}
	tcp := ip[ihl:total]
	thl := int(tcp[12]>>4) * 4
	if thl < 20 || thl > len(tcp) {
		return nil
	}
	f := wireFlow{srcPort: binary.BigEndian.Uint16(tcp[0:2]), dstPort: binary.BigEndian.Uint16(tcp[2:4])}
	copy(f.srcIP[:], ip[12:16])
	copy(f.dstIP[:], ip[16:20])
	if f.srcPort != t.daemonPort && f.srcPort != t.fakePort && f.dstPort != t.daemonPort && f.dstPort != t.fakePort {
		return nil
	}
	seq, syn := binary.BigEndian.Uint32(tcp[4:8]), tcp[13]&0x02 != 0
	payload := tcp[thl:]
	t.mu.Lock()
	defer t.mu.Unlock()
	if syn {
		// A connection opens (perhaps on a port pair used before).
		t.flows[f] = &wireStream{next: seq + 1}
		payload = nil
	}
	s := t.flows[f]
	if s == nil {
		// Opened before the tap: its streams cannot be followed.
		s = &wireStream{other: true}
		t.flows[f] = s
	}
	if s.other || len(payload) == 0 {
		return nil
	}
	switch d := int32(seq - s.next); {
	case d > 0:
		return fmt.Errorf("flow %v: %d bytes missing before sequence %d (a dropped packet?)", f, d, seq)
	case d < 0: // a retransmission, perhaps with new bytes at its end
		if int(-d) >= len(payload) {
			return nil
		}
		payload = payload[-d:]
	}
	s.next += uint32(len(payload))
	s.buf = append(s.buf, payload...)
	switch {
	case f.srcPort == t.fakePort:
		t.responses(s, ts)
	case f.dstPort == t.fakePort:
		return t.requests(s, ts)
	case f.srcPort == t.daemonPort:
		return t.frames(f, s, ts, false)
	case f.dstPort == t.daemonPort:
		return t.frames(f, s, ts, true)
	}
	return nil
}

// responses scans the fake model's responses for call ids; the fake writes
// each response whole, and a call's id first appears in its
// output_item.added event.
func (t *wireTap) responses(s *wireStream, ts time.Time) {
	const key = `"call_id":"`
	for {
		i := bytes.Index(s.buf, []byte(key))
		if i < 0 {
			break
		}
		rest := s.buf[i+len(key):]
		j := bytes.IndexByte(rest, '"')
		if j < 0 {
			return // the rest of the id is in the next segment
		}
		id := string(rest[:j])
		if _, ok := t.respIn[id]; !ok {
			t.respIn[id] = ts
		}
		s.buf = rest[j:]
	}
	// Keep only a tail that could begin a split key.
	if k := len(s.buf) - len(key); k > 0 {
		s.buf = append(s.buf[:0], s.buf[k:]...)
	}
}

// requests parses HTTP requests to the fake model; a request is stamped
// with the segment that completed it.
func (t *wireTap) requests(s *wireStream, ts time.Time) error {
	for {
		end := bytes.Index(s.buf, []byte("\r\n\r\n"))
		if end < 0 {
			return nil
		}
		head := s.buf[:end]
		cl := 0
		for _, line := range bytes.Split(head, []byte("\r\n"))[1:] {
			k, v, _ := bytes.Cut(line, []byte(":"))
			k, v = bytes.TrimSpace(k), bytes.TrimSpace(v)
			switch {
			case bytes.EqualFold(k, []byte("Content-Length")):
				n, err := strconv.Atoi(string(v))
				if err != nil || n < 0 {
					return fmt.Errorf("model request with Content-Length %q", v)
				}
				cl = n
			case bytes.EqualFold(k, []byte("Transfer-Encoding")):
				return fmt.Errorf("model request with Transfer-Encoding %q, which the tap does not read", v)
			}
		}
		if len(s.buf) < end+4+cl {
			return nil
		}
		body := s.buf[end+4 : end+4+cl]
		if bytes.HasPrefix(head, []byte("POST ")) && cl > 0 {
			var req struct {
				Input []json.RawMessage `json:"input"`
			}
			if err := json.Unmarshal(body, &req); err != nil {
				return fmt.Errorf("model request body: %w", err)
			}
			if n := len(req.Input); n > 0 {
				var last struct {
					Type   string `json:"type"`
					CallID string `json:"call_id"`
				}
				if err := json.Unmarshal(req.Input[n-1], &last); err != nil {
					return err
				}
				if last.Type == "function_call_output" {
					t.reqOut[last.CallID] = ts
				}
			}
		}
		s.buf = append(s.buf[:0], s.buf[end+4+cl:]...)
	}
}

// frames parses the websocket frames of flow f (after the upgrade
// exchange); masked tells a client's frames.
func (t *wireTap) frames(f wireFlow, s *wireStream, ts time.Time, masked bool) error {
	if !s.handshake {
		end := bytes.Index(s.buf, []byte("\r\n\r\n"))
		if end < 0 {
			return nil
		}
		// Plain HTTP on the same port (the metrics scrapes) is not read.
		head := bytes.ToLower(s.buf[:end])
		if !bytes.Contains(head, []byte("upgrade: websocket")) {
			s.other = true
			s.buf = nil
			return nil
		}
		s.handshake = true
		s.buf = append(s.buf[:0], s.buf[end+4:]...)
	}
	for {
		if len(s.buf) < 2 {
			return nil
		}
		b0, b1 := s.buf[0], s.buf[1]
		n, hl := uint64(b1&0x7f), 2
		switch n {
		case 126:
			if len(s.buf) < 4 {
				return nil
			}
			n, hl = uint64(binary.BigEndian.Uint16(s.buf[2:4])), 4
		case 127:
			if len(s.buf) < 10 {
				return nil
			}
			n, hl = binary.BigEndian.Uint64(s.buf[2:10]), 10
		}
		if n > wireMaxFrame {
			return fmt.Errorf("flow %v: a websocket frame of %d bytes", f, n)
		}
		if b0&0x70 != 0 {
			return fmt.Errorf("flow %v: a websocket frame with RSV bits %#x (compression is not read)", f, b0&0x70)
		}
		var key []byte
		if b1&0x80 != 0 {
			if len(s.buf) < hl+4 {
				return nil
			}
			key = s.buf[hl : hl+4]
			hl += 4
		}
		if (key != nil) != masked {
			return fmt.Errorf("flow %v: websocket frame masking %v where it should be %v", f, key != nil, masked)
		}
		if len(s.buf) < hl+int(n) {
			return nil
		}
		data := s.buf[hl : hl+int(n)]
		for i := range data {
			data[i] ^= keyByte(key, i)
		}
		switch op, fin := b0&0x0f, b0&0x80 != 0; {
		case op >= 8: // control frames
		case op == 0 || !fin:
			return fmt.Errorf("flow %v: a fragmented websocket message, which the tap does not read", f)
		case op == 1:
			t.message(f, data, ts, masked)
		}
		s.buf = append(s.buf[:0], s.buf[hl+int(n):]...)
	}
}

func keyByte(key []byte, i int) byte {
	if key == nil {
		return 0
	}
	return key[i&3]
}

// message records an item/tool/call going out on flow f, or a client's
// answer to one coming in.
func (t *wireTap) message(f wireFlow, data []byte, ts time.Time, fromClient bool) {
	if !fromClient {
		if !bytes.Contains(data, []byte(`"item/tool/call"`)) {
			return
		}
		var m struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
			Params struct {
				CallID string `json:"callId"`
			} `json:"params"`
		}
		if json.Unmarshal(data, &m) != nil || m.Method != "item/tool/call" {
			return
		}
		t.reqCalls[wireCallKey{f, string(m.ID)}] = m.Params.CallID
		t.callOut[m.Params.CallID] = ts
		return
	}
	if !bytes.Contains(data, []byte(`"result"`)) {
		return
	}
	var m struct {
		ID json.RawMessage `json:"id"`
	}
	if json.Unmarshal(data, &m) != nil {
		return
	}
	k := wireCallKey{f.reverse(), string(m.ID)}
	if id, ok := t.reqCalls[k]; ok {
		delete(t.reqCalls, k)
		t.answerIn[id] = ts
	}
}

// overheads returns the wire overheads of the given calls, sorted. The
// tap reads behind the traffic, so it waits up to a few seconds for calls
// it has not seen whole yet, then fails naming one.
func (t *wireTap) overheads(calls map[string][2]time.Time) (dynOverheads, error) {
	deadline := time.Now().Add(3 * time.Second)
	for {
		o, err := t.tryOverheads(calls)
		if err == nil || t.readErr() != nil || time.Now().After(deadline) {
			return o, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// readErr is what went wrong while reading, if anything.
func (t *wireTap) readErr() error {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
}

// stamps returns the four wire times of a call.
func (t *wireTap) stamps(id string) (respIn, callOut, answerIn, reqOut time.Time, ok bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	var ok1, ok2, ok3, ok4 bool
	respIn, ok1 = t.respIn[id]
	callOut, ok2 = t.callOut[id]
	answerIn, ok3 = t.answerIn[id]
	reqOut, ok4 = t.reqOut[id]
	return respIn, callOut, answerIn, reqOut, ok1 && ok2 && ok3 && ok4
}

func (t *wireTap) tryOverheads(calls map[string][2]time.Time) (dynOverheads, error) {
	if err := t.readErr(); err != nil {
		return dynOverheads{}, err
	}
	var o dynOverheads
	for id := range calls {
		ri, co, ai, ro, ok := t.stamps(id)
		if !ok {
			return o, fmt.Errorf("call %s: the wire tap did not see all of the model's response, the item/tool/call, the answer and the next request", id)
		}
		in, out := co.Sub(ri), ro.Sub(ai)
		if in <= 0 || out <= 0 || ai.Before(co) {
			return o, fmt.Errorf("call %s: wire events out of order: response %v, call %v, answer %v, request %v", id, ri, co, ai, ro)
		}
		o.inbound = append(o.inbound, in)
		o.outbound = append(o.outbound, out)
		o.total = append(o.total, in+out)
	}
	o.sort()
	return o, nil
}

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
// fake model's), and records per call id, with the kernel's receive
// timestamps:
//
//	respIn   the model's response carrying the call reached the daemon
//	callOut  the item/tool/call request left the daemon
//	answerIn the client's answer reached the daemon
//	reqOut   the last byte of the next model request, the one carrying the
//	         call's function_call_output, left the daemon
//
// overhead = (callOut − respIn) + (reqOut − answerIn). Unlike the
// harness's own clocks, this leaves out when the benchmark process's
// goroutines (the fake model and the client) got to run.
type wireTap struct {
	fd                   int
	daemonPort, fakePort uint16
	closeOnce            sync.Once
	stop                 chan struct{}
	done                 chan struct{}

	mu       sync.Mutex
	err      error
	flows    map[wireFlow]*wireStream
	reqCalls map[string]string // JSON-RPC id of an item/tool/call → call id
	respIn   map[string]time.Time
	callOut  map[string]time.Time
	answerIn map[string]time.Time
	reqOut   map[string]time.Time
}

type wireFlow struct{ src, dst uint16 }

// wireStream is one direction of one TCP connection: bytes not yet parsed.
type wireStream struct {
	buf       []byte
	handshake bool // the HTTP upgrade has been skipped (websocket flows)
	other     bool // not a websocket: ignored
}

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
	fd, err := syscall.Socket(syscall.AF_PACKET, syscall.SOCK_RAW|syscall.SOCK_CLOEXEC, int(htons(syscall.ETH_P_ALL)))
	if err != nil {
		return nil, fmt.Errorf("packet socket: %w", err)
	}
	t := &wireTap{
		fd: fd, daemonPort: dp, fakePort: fp,
		stop: make(chan struct{}), done: make(chan struct{}),
		flows:    map[wireFlow]*wireStream{},
		reqCalls: map[string]string{},
		respIn:   map[string]time.Time{}, callOut: map[string]time.Time{},
		answerIn: map[string]time.Time{}, reqOut: map[string]time.Time{},
	}
	setup := func() error {
		// Only TCP segments with a payload, received (not the outgoing
		// copy loopback also shows), to or from one of the two ports.
		if err := syscall.AttachLsf(fd, wireFilter(dp, fp)); err != nil {
			return fmt.Errorf("attach filter: %w", err)
		}
		if err := syscall.Bind(fd, &syscall.SockaddrLinklayer{Protocol: htons(syscall.ETH_P_ALL), Ifindex: lo}); err != nil {
			return fmt.Errorf("bind to loopback: %w", err)
		}
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_TIMESTAMPNS, 1); err != nil {
			return fmt.Errorf("timestamps: %w", err)
		}
		if err := syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUFFORCE, 32<<20); err != nil {
			_ = syscall.SetsockoptInt(fd, syscall.SOL_SOCKET, syscall.SO_RCVBUF, 32<<20)
		}
		tv := syscall.NsecToTimeval(int64(50 * time.Millisecond))
		return syscall.SetsockoptTimeval(fd, syscall.SOL_SOCKET, syscall.SO_RCVTIMEO, &tv)
	}
	if err := setup(); err != nil {
		_ = syscall.Close(fd)
		return nil, err
	}
	go t.read()
	return t, nil
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

// wireFilter is a classic BPF program over an Ethernet-framed packet
// (loopback's framing): accept a received IPv4 TCP segment with a payload
// whose source or destination port is a or b.
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
		ret     = syscall.BPF_RET | syscall.BPF_K
		rsh     = syscall.BPF_ALU | syscall.BPF_RSH | syscall.BPF_K
		lsh     = syscall.BPF_ALU | syscall.BPF_LSH | syscall.BPF_K
		subX    = syscall.BPF_ALU | syscall.BPF_SUB | syscall.BPF_X
		st      = syscall.BPF_ST
		ldxMem  = syscall.BPF_LDX | syscall.BPF_MEM
		skfAD   = 0xfffff000 // SKF_AD_OFF
		pktType = 4          // SKF_AD_PKTTYPE
	)
	// Jump offsets count instructions after the jump; "drop" is the last
	// instruction, "accept" the one before it.
	prog := []syscall.SockFilter{
		{Code: ldAbsW, K: skfAD + pktType},                 // 0
		{Code: jeq, K: 0, Jt: 0, Jf: 21},                   // 1: PACKET_HOST
		{Code: ldAbsH, K: 12},                              // 2
		{Code: jeq, K: 0x0800, Jt: 0, Jf: 19},              // 3: IPv4
		{Code: ldAbsB, K: 23},                              // 4
		{Code: jeq, K: syscall.IPPROTO_TCP, Jt: 0, Jf: 17}, // 5
		{Code: ldxMSH, K: 14},                              // 6: X = IP header length
		{Code: ldIndH, K: 14},                              // 7: source port
		{Code: jeq, K: uint32(a), Jt: 4, Jf: 0},            // 8
		{Code: jeq, K: uint32(b), Jt: 3, Jf: 0},            // 9
		{Code: ldIndH, K: 16},                              // 10: destination port
		{Code: jeq, K: uint32(a), Jt: 1, Jf: 0},            // 11
		{Code: jeq, K: uint32(b), Jt: 0, Jf: 10},           // 12
		{Code: ldIndB, K: 26},                              // 13: TCP data offset
		{Code: rsh, K: 4},                                  // 14
		{Code: lsh, K: 2},                                  // 15: TCP header length
		{Code: st, K: 0},                                   // 16: M[0] = it
		{Code: ldAbsH, K: 16},                              // 17: IP total length
		{Code: subX},                                       // 18: minus IP header
		{Code: ldxMem, K: 0},                               // 19
		{Code: subX},                                       // 20: minus TCP header
		{Code: jgt, K: 0, Jt: 0, Jf: 1},                    // 21: payload?
		{Code: ret, K: 1 << 18},                            // 22: accept
		{Code: ret, K: 0},                                  // 23: drop
	}
	return prog
}

// close stops the reader and reports what went wrong while reading.
func (t *wireTap) close() error {
	t.closeOnce.Do(func() {
		close(t.stop)
		<-t.done
		_ = syscall.Close(t.fd)
	})
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.err
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
		n, oobn, _, _, err := syscall.Recvmsg(t.fd, buf, oob, 0)
		if err != nil {
			if errors.Is(err, syscall.EAGAIN) || errors.Is(err, syscall.EINTR) {
				continue
			}
			t.fail(fmt.Errorf("read packet: %w", err))
			return
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
	if len(p) < 14+20 {
		return nil
	}
	ip := p[14:]
	ihl := int(ip[0]&0x0f) * 4
	total := int(binary.BigEndian.Uint16(ip[2:4]))
	if total > len(ip) || ihl < 20 || total < ihl+20 {
		return nil
	}
	tcp := ip[ihl:total]
	thl := int(tcp[12]>>4) * 4
	if thl < 20 || thl > len(tcp) {
		return nil
	}
	f := wireFlow{binary.BigEndian.Uint16(tcp[0:2]), binary.BigEndian.Uint16(tcp[2:4])}
	payload := tcp[thl:]
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.flows[f]
	if s == nil {
		s = &wireStream{}
		t.flows[f] = s
	}
	s.buf = append(s.buf, payload...)
	switch {
	case f.src == t.fakePort:
		// A response; the fake writes each one whole, and a call's id
		// first appears in its output_item.added event.
		for {
			i := bytes.Index(s.buf, []byte(`"call_id":"`))
			if i < 0 {
				break
			}
			rest := s.buf[i+len(`"call_id":"`):]
			j := bytes.IndexByte(rest, '"')
			if j < 0 {
				return nil // the rest of the id is in the next segment
			}
			id := string(rest[:j])
			if _, ok := t.respIn[id]; !ok {
				t.respIn[id] = ts
			}
			s.buf = rest[j:]
		}
		// Keep only a tail that could begin a split key.
		if k := len(s.buf) - len(`"call_id":"`); k > 0 {
			s.buf = append(s.buf[:0], s.buf[k:]...)
		}
	case f.dst == t.fakePort:
		return t.requests(s, ts)
	case f.src == t.daemonPort:
		return t.frames(s, ts, false)
	case f.dst == t.daemonPort:
		return t.frames(s, ts, true)
	}
	return nil
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
		cl := -1
		for _, line := range bytes.Split(head, []byte("\r\n")) {
			k, v, ok := bytes.Cut(line, []byte(":"))
			if ok && bytes.EqualFold(bytes.TrimSpace(k), []byte("Content-Length")) {
				n, err := strconv.Atoi(string(bytes.TrimSpace(v)))
				if err != nil {
					return fmt.Errorf("request with Content-Length %q", v)
				}
				cl = n
			}
		}
		if cl < 0 {
			if !bytes.HasPrefix(head, []byte("GET ")) {
				return fmt.Errorf("model request without a Content-Length: %q", head)
			}
			cl = 0
		}
		if len(s.buf) < end+4+cl {
			return nil
		}
		body := s.buf[end+4 : end+4+cl]
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
		s.buf = append(s.buf[:0], s.buf[end+4+cl:]...)
	}
}

// frames parses websocket frames (after the upgrade exchange); masked
// tells a client's frames.
func (t *wireTap) frames(s *wireStream, ts time.Time, masked bool) error {
	if s.other {
		s.buf = s.buf[:0]
		return nil
	}
	if !s.handshake {
		end := bytes.Index(s.buf, []byte("\r\n\r\n"))
		if end < 0 {
			return nil
		}
		// Plain HTTP on the same port (the metrics scrapes) is not read.
		head := bytes.ToLower(s.buf[:end])
		if !bytes.Contains(head, []byte("upgrade: websocket")) {
			s.other = true
			s.buf = s.buf[:0]
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
		n, hl := int(b1&0x7f), 2
		switch n {
		case 126:
			if len(s.buf) < 4 {
				return nil
			}
			n, hl = int(binary.BigEndian.Uint16(s.buf[2:4])), 4
		case 127:
			if len(s.buf) < 10 {
				return nil
			}
			n, hl = int(binary.BigEndian.Uint64(s.buf[2:10])), 10
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
			return fmt.Errorf("websocket frame masking %v on a flow where it should be %v", key != nil, masked)
		}
		if len(s.buf) < hl+n {
			return nil
		}
		data := s.buf[hl : hl+n]
		for i := range data {
			data[i] ^= keyByte(key, i)
		}
		if b0&0x0f == 1 && b0&0x80 != 0 { // a whole text message
			t.message(data, ts, masked)
		}
		s.buf = append(s.buf[:0], s.buf[hl+n:]...)
	}
}

func keyByte(key []byte, i int) byte {
	if key == nil {
		return 0
	}
	return key[i&3]
}

func (t *wireTap) message(data []byte, ts time.Time, fromClient bool) {
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
		t.reqCalls[string(m.ID)] = m.Params.CallID
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
	if id, ok := t.reqCalls[string(m.ID)]; ok {
		delete(t.reqCalls, string(m.ID))
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
		if err == nil || time.Now().After(deadline) {
			return o, err
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func (t *wireTap) tryOverheads(calls map[string][2]time.Time) (dynOverheads, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.err != nil {
		return dynOverheads{}, t.err
	}
	var o dynOverheads
	for id := range calls {
		ri, ok1 := t.respIn[id]
		co, ok2 := t.callOut[id]
		ai, ok3 := t.answerIn[id]
		ro, ok4 := t.reqOut[id]
		if !ok1 || !ok2 || !ok3 || !ok4 {
			return o, fmt.Errorf("call %s: the wire tap saw response=%v call=%v answer=%v request=%v", id, ok1, ok2, ok3, ok4)
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

package sandbox

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// The daemon and a pooled sandbox's launcher (box_linux.go, boxlauncher_linux.go)
// talk over a Unix stream socketpair inherited by the launcher as
// descriptor 3. A message is a header (type, then the body's length as a
// big-endian uint32) followed by the body, sent by one sendmsg that
// carries the message's descriptors (SCM_RIGHTS). The receiver reads the
// header with recvmsg, which hands it those descriptors, and then exactly
// the body: a read never runs into the next message, whose descriptors
// would be lost.
//
// The exchange for one command:
//
//	daemon                         launcher
//	start (stdin, stdout, stderr) →
//	                             ← started (pidfd) | failed
//	                             ← exited (wait status; the process stays a zombie)
//	release                       →
//	                             ← clean (the leader reaped, the rest killed and reaped)
//
// and once, when the launcher is set up: ready (its own pidfd).
//
// A shell started ahead of its command (box_linux.go, aheadShell): after
// a command's release, the daemon may send
//
//	ahead (stdin, stdout, stderr, script) →
//
// and the launcher starts that shell, which waits for the rest of its
// script on the fourth descriptor (its descriptor 3). The next command
// then either takes it:
//
//	run                           →
//	                             ← started (pidfd) | failed (no live shell ahead)
//
// and goes on as a started command, or is started as usual, in which case
// the launcher first kills the shell ahead and everything it started.
const (
	msgReady   byte = 'R'
	msgStart   byte = 'S'
	msgStarted byte = 's'
	msgFailed  byte = 'f'
	msgExited  byte = 'x'
	msgRelease byte = 'r'
	msgClean   byte = 'c'
	msgAhead   byte = 'a'
	msgRun     byte = 'u'
)

// boxFD is the launcher's end of the socketpair.
const boxFD = 3

const (
	msgHeaderLen = 5
	// maxMsgBody bounds a message: argv and environment together may be
	// a few MiB (the kernel's own limit on execve is about 2 MiB).
	maxMsgBody = 8 << 20
	// maxMsgFDs is the most descriptors a message carries.
	maxMsgFDs = 4
)

// errMsgTooLarge is returned for a message beyond maxMsgBody.
var errMsgTooLarge = errors.New("sandbox: launcher message too large")

// boxMsg is one message.
type boxMsg struct {
	typ  byte
	body []byte
	fds  []int
}

// closeFDs closes the message's descriptors (those not taken).
func (m *boxMsg) closeFDs() {
	for _, fd := range m.fds {
		if fd >= 0 {
			_ = unix.Close(fd)
		}
	}
	m.fds = nil
}

// frame returns the header and body of a message of type typ.
func frame(typ byte, body []byte) ([]byte, error) {
	if len(body) > maxMsgBody {
		return nil, errMsgTooLarge
	}
	b := make([]byte, msgHeaderLen, msgHeaderLen+len(body))
	b[0] = typ
	binary.BigEndian.PutUint32(b[1:], uint32(len(body)))
	return append(b, body...), nil
}

// parseHeader returns the type and body length of a header.
func parseHeader(h []byte) (byte, int, error) {
	n := binary.BigEndian.Uint32(h[1:])
	if n > maxMsgBody {
		return 0, 0, errMsgTooLarge
	}
	return h[0], int(n), nil
}

// parseRights returns the descriptors of the SCM_RIGHTS messages in oob.
func parseRights(oob []byte) ([]int, error) {
	if len(oob) == 0 {
		return nil, nil
	}
	cmsgs, err := unix.ParseSocketControlMessage(oob)
	if err != nil {
		return nil, err
	}
	var fds []int
	for _, c := range cmsgs {
		got, err := unix.ParseUnixRights(&c)
		if err != nil {
			continue
		}
		fds = append(fds, got...)
	}
	return fds, nil
}

// msgWriter appends the fields of a message body.
type msgWriter struct{ b []byte }

func (w *msgWriter) uint(v uint64) { w.b = binary.AppendUvarint(w.b, v) }

func (w *msgWriter) str(s string) {
	w.uint(uint64(len(s)))
	w.b = append(w.b, s...)
}

func (w *msgWriter) strs(ss []string) {
	w.uint(uint64(len(ss)))
	for _, s := range ss {
		w.str(s)
	}
}

// msgReader reads the fields of a message body; the first malformed field
// sets err and every later read returns zero values.
type msgReader struct {
	b   []byte
	err error
}

var errMalformed = errors.New("sandbox: malformed launcher message")

func (r *msgReader) uint() uint64 {
	if r.err != nil {
		return 0
	}
	v, n := binary.Uvarint(r.b)
	if n <= 0 {
		r.err = errMalformed
		return 0
	}
	r.b = r.b[n:]
	return v
}

func (r *msgReader) str() string {
	n := r.uint()
	if r.err != nil {
		return ""
	}
	if n > uint64(len(r.b)) {
		r.err = errMalformed
		return ""
	}
	s := string(r.b[:n])
	r.b = r.b[n:]
	return s
}

func (r *msgReader) strs() []string {
	n := r.uint()
	if r.err != nil || n > uint64(len(r.b)) {
		// Every string takes at least one byte.
		r.err = errMalformed
		return nil
	}
	out := make([]string, 0, n)
	for range n {
		out = append(out, r.str())
	}
	return out
}

// done reports the first error, or one for bytes left over.
func (r *msgReader) done() error {
	if r.err == nil && len(r.b) != 0 {
		r.err = errMalformed
	}
	return r.err
}

// startReq is what the launcher needs to start a command; its standard
// input, output and error come as the message's three descriptors.
type startReq struct {
	path string
	argv []string
	env  []string
	dir  string
	// setctty makes standard input (a terminal) the controlling terminal
	// of the command's new session.
	setctty bool
}

func (s startReq) encode() []byte {
	var w msgWriter
	w.str(s.path)
	w.strs(s.argv)
	w.strs(s.env)
	w.str(s.dir)
	var flags uint64
	if s.setctty {
		flags |= 1
	}
	w.uint(flags)
	return w.b
}

func decodeStart(b []byte) (startReq, error) {
	r := msgReader{b: b}
	s := startReq{path: r.str(), argv: r.strs(), env: r.strs(), dir: r.str()}
	s.setctty = r.uint()&1 != 0
	return s, r.done()
}

// startFailure is why the launcher could not start a command: the
// *os.PathError os.StartProcess returned, rebuilt on the daemon's side so
// that it reads as the same failure would unsandboxed.
type startFailure struct {
	op, path string
	errno    unix.Errno
	text     string // when the error was no *os.PathError
}

func failureOf(err error) startFailure {
	var pe *os.PathError
	var errno unix.Errno
	if errors.As(err, &pe) && errors.As(pe.Err, &errno) {
		return startFailure{op: pe.Op, path: pe.Path, errno: errno}
	}
	return startFailure{text: err.Error()}
}

func (f startFailure) encode() []byte {
	var w msgWriter
	w.str(f.op)
	w.str(f.path)
	w.uint(uint64(f.errno))
	w.str(f.text)
	return w.b
}

func decodeFailure(b []byte) (startFailure, error) {
	r := msgReader{b: b}
	f := startFailure{op: r.str(), path: r.str(), errno: unix.Errno(r.uint()), text: r.str()}
	return f, r.done()
}

func (f startFailure) err() error {
	if f.text != "" || f.op == "" {
		return errors.New(f.text)
	}
	return &os.PathError{Op: f.op, Path: f.path, Err: f.errno}
}

func encodeUint(v uint64) []byte {
	var w msgWriter
	w.uint(v)
	return w.b
}

func decodeUint(b []byte) (uint64, error) {
	r := msgReader{b: b}
	v := r.uint()
	return v, r.done()
}

// pidOfPidfd returns the pid, in the daemon's PID namespace, of the
// process a pidfd refers to (its fdinfo's "Pid:" line).
func pidOfPidfd(fd int) (int, error) {
	b, err := os.ReadFile("/proc/self/fdinfo/" + strconv.Itoa(fd))
	if err != nil {
		return 0, err
	}
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "Pid:"); ok {
			pid, err := strconv.Atoi(strings.TrimSpace(v))
			if err != nil || pid <= 0 {
				return 0, fmt.Errorf("sandbox: pidfd of a process not visible here (%q)", strings.TrimSpace(v))
			}
			return pid, nil
		}
	}
	return 0, errors.New("sandbox: no pid in the pidfd's fdinfo")
}

// readFull reads exactly len(b) bytes from fd (a blocking descriptor).
func readFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Read(fd, b)
		if err == unix.EINTR {
			continue
		}
		if err != nil {
			return err
		}
		if n == 0 {
			return io.ErrUnexpectedEOF
		}
		b = b[n:]
	}
	return nil
}

package sandbox

import (
	"encoding/binary"
	"fmt"
	"runtime"
	"sync"
	"unsafe"

	"golang.org/x/sys/unix"
)

// deniedNetSyscalls are refused with EPERM when the network is off: the
// reference's Restricted list (codex-rs linux-sandbox seccomp) but for
// getpeername (see notConnSyscalls). recvfrom stays allowed because tools
// use socketpairs to talk to their children.
var deniedNetSyscalls = []uint32{
	unix.SYS_CONNECT,
	unix.SYS_ACCEPT,
	unix.SYS_ACCEPT4,
	unix.SYS_BIND,
	unix.SYS_LISTEN,
	unix.SYS_GETSOCKNAME,
	unix.SYS_SHUTDOWN,
	unix.SYS_SENDTO,
	unix.SYS_SENDMMSG,
	unix.SYS_RECVMMSG,
	unix.SYS_GETSOCKOPT,
	unix.SYS_SETSOCKOPT,
	unix.SYS_PTRACE,
	unix.SYS_PROCESS_VM_READV,
	unix.SYS_PROCESS_VM_WRITEV,
	unix.SYS_IO_URING_SETUP,
	unix.SYS_IO_URING_ENTER,
	unix.SYS_IO_URING_REGISTER,
}

// notConnSyscalls are refused with ENOTCONN, "no peer", rather than EPERM:
// bash takes any getpeername error on its standard input other than
// ENOTSOCK, ENOTCONN, EINVAL or EBADF for a remote-shell connection and
// then sources ~/.bashrc for every `bash -c` (the rshd heuristic), which
// ran the user's whole interactive profile in every sandboxed command.
var notConnSyscalls = []uint32{unix.SYS_GETPEERNAME}

// auditArch is the seccomp_data.arch value of this build's architecture.
func auditArch() (uint32, error) {
	switch runtime.GOARCH {
	case "amd64":
		return unix.AUDIT_ARCH_X86_64, nil
	case "arm64":
		return unix.AUDIT_ARCH_AARCH64, nil
	}
	return 0, fmt.Errorf("no network filter for GOARCH %s", runtime.GOARCH)
}

// Offsets into struct seccomp_data.
const (
	seccompDataNr   = 0
	seccompDataArch = 4
	seccompDataArg0 = 16 // low 32 bits on little-endian machines
)

// x32SyscallBit marks x32-ABI syscalls on x86_64; they carry the x86_64
// audit arch but other numbers, so they are refused wholesale.
const x32SyscallBit = 0x40000000

// bpfInsn is a classic BPF instruction whose jump targets are labels,
// resolved by assemble.
type bpfInsn struct {
	code   uint16
	k      uint32
	jt, jf string // labels; "" falls through
	label  string // this instruction's own label
}

// networkFilter builds the seccomp program: foreign architectures are
// killed (SIGSYS), the denied syscalls and non-AF_UNIX socket/socketpair
// calls get EPERM, getpeername ENOTCONN, everything else is allowed.
func networkFilter() ([]unix.SockFilter, error) {
	arch, err := auditArch()
	if err != nil {
		return nil, err
	}
	const (
		ld  = unix.BPF_LD | unix.BPF_W | unix.BPF_ABS
		jeq = unix.BPF_JMP | unix.BPF_JEQ | unix.BPF_K
		jge = unix.BPF_JMP | unix.BPF_JGE | unix.BPF_K
		ret = unix.BPF_RET | unix.BPF_K
	)
	prog := []bpfInsn{
		{code: ld, k: seccompDataArch},
		{code: jeq, k: arch, jf: "kill"},
		{code: ld, k: seccompDataNr},
	}
	if runtime.GOARCH == "amd64" {
		prog = append(prog, bpfInsn{code: jge, k: x32SyscallBit, jt: "errno"})
	}
	for _, nr := range deniedNetSyscalls {
		prog = append(prog, bpfInsn{code: jeq, k: nr, jt: "errno"})
	}
	for _, nr := range notConnSyscalls {
		prog = append(prog, bpfInsn{code: jeq, k: nr, jt: "notconn"})
	}
	prog = append(prog,
		bpfInsn{code: jeq, k: unix.SYS_SOCKET, jt: "family"},
		bpfInsn{code: jeq, k: unix.SYS_SOCKETPAIR, jt: "family"},
		bpfInsn{code: ret, k: unix.SECCOMP_RET_ALLOW},
		bpfInsn{label: "family", code: ld, k: seccompDataArg0},
		bpfInsn{code: jeq, k: unix.AF_UNIX, jf: "errno"},
		bpfInsn{code: ret, k: unix.SECCOMP_RET_ALLOW},
		bpfInsn{label: "errno", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.EPERM)},
		bpfInsn{label: "notconn", code: ret, k: unix.SECCOMP_RET_ERRNO | uint32(unix.ENOTCONN)},
		bpfInsn{label: "kill", code: ret, k: unix.SECCOMP_RET_KILL_PROCESS},
	)
	return assemble(prog)
}

func assemble(prog []bpfInsn) ([]unix.SockFilter, error) {
	at := map[string]int{}
	for i, in := range prog {
		if in.label != "" {
			at[in.label] = i
		}
	}
	rel := func(i int, label string) (uint8, error) {
		if label == "" {
			return 0, nil
		}
		t, ok := at[label]
		d := t - (i + 1)
		if !ok || d < 0 || d > 255 {
			return 0, fmt.Errorf("bad bpf jump to %q from %d", label, i)
		}
		return uint8(d), nil
	}
	out := make([]unix.SockFilter, len(prog))
	for i, in := range prog {
		jt, err := rel(i, in.jt)
		if err != nil {
			return nil, err
		}
		jf, err := rel(i, in.jf)
		if err != nil {
			return nil, err
		}
		out[i] = unix.SockFilter{Code: in.code, Jt: jt, Jf: jf, K: in.k}
	}
	return out, nil
}

// installNetworkFilter loads the filter on the calling thread (and, with
// SECCOMP_FILTER_FLAG_TSYNC in flags, on every thread of the process);
// children forked from the thread inherit it. no_new_privs must already be
// set.
func installNetworkFilter(flags uintptr) error {
	filter, err := networkFilter()
	if err != nil {
		return err
	}
	prog := unix.SockFprog{Len: uint16(len(filter)), Filter: &filter[0]}
	r, _, errno := unix.Syscall(unix.SYS_SECCOMP, unix.SECCOMP_SET_MODE_FILTER,
		flags, uintptr(unsafe.Pointer(&prog)))
	runtime.KeepAlive(filter)
	if errno != 0 {
		return errno
	}
	if r != 0 {
		return fmt.Errorf("thread %d could not be synchronised", r)
	}
	return nil
}

// networkFilterBytes is the filter as struct sock_filter[] in native byte
// order: what bubblewrap's --seccomp reads from its descriptor. It is built
// once; callers must not modify it.
var networkFilterBytes = sync.OnceValues(func() ([]byte, error) {
	filter, err := networkFilter()
	if err != nil {
		return nil, err
	}
	out := make([]byte, 0, 8*len(filter))
	for _, f := range filter {
		out = binary.NativeEndian.AppendUint16(out, f.Code)
		out = append(out, f.Jt, f.Jf)
		out = binary.NativeEndian.AppendUint32(out, f.K)
	}
	return out, nil
})

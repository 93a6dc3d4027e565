package execsession

import (
	"os"
	"strconv"
	"strings"
)

// reapLeader waits for the leader to exit without reaping it
// (sandbox.Cmd.WaitExited), kills what is left of its tree while its
// zombie still pins the group and session ids, then reaps it, all under
// killMu.
func reapLeader(p *process) error {
	p.cmd.WaitExited()
	p.killMu.Lock()
	defer p.killMu.Unlock()
	p.sweepLocked(0)
	err := p.cmd.Wait()
	p.reaped = true
	return err
}

// procEntry is the part of /proc/<pid>/stat the tree sweep needs.
type procEntry struct {
	pid, ppid, pgrp, sid int
	// zombie is true for processes that already died and wait to be
	// reaped: they need no signal.
	zombie bool
}

// readProcs lists the processes of the system from /proc.
func readProcs() []procEntry {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	defer d.Close()
	names, err := d.Readdirnames(-1)
	if err != nil {
		return nil
	}
	out := make([]procEntry, 0, len(names))
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + name + "/stat")
		if err != nil {
			continue
		}
		// "pid (comm) state ppid pgrp session ..."; comm may hold spaces
		// and parentheses, so split after the last ')'.
		s := string(b)
		i := strings.LastIndexByte(s, ')')
		if i < 0 {
			continue
		}
		f := strings.Fields(s[i+1:])
		if len(f) < 4 {
			continue
		}
		ppid, _ := strconv.Atoi(f[1])
		pgrp, _ := strconv.Atoi(f[2])
		sid, _ := strconv.Atoi(f[3])
		out = append(out, procEntry{pid: pid, ppid: ppid, pgrp: pgrp, sid: sid, zombie: f[0] == "Z" || f[0] == "X"})
	}
	return out
}

// treeMembers returns the live (not zombie) processes of a session's tree:
// members of process group pgid, members of terminal session sid (when
// non-zero), and descendants of root and of those members (when root is
// non-zero; pass 0 once the leader was reaped). The daemon itself and init
// are never included.
func treeMembers(root, pgid, sid int) []int {
	var procs []procEntry
	for _, p := range readProcs() {
		if !p.zombie {
			procs = append(procs, p)
		}
	}
	children := map[int][]int{}
	for _, p := range procs {
		children[p.ppid] = append(children[p.ppid], p.pid)
	}
	live := map[int]bool{}
	for _, p := range procs {
		live[p.pid] = true
	}
	self := os.Getpid()
	seen := map[int]bool{}
	var queue []int
	add := func(pid int) {
		if pid <= 1 || pid == self || seen[pid] {
			return
		}
		seen[pid] = true
		queue = append(queue, pid)
	}
	for _, p := range procs {
		if (pgid > 0 && p.pgrp == pgid) || (sid > 0 && p.sid == sid) {
			add(p.pid)
		}
	}
	if root > 0 && live[root] {
		add(root)
	}
	for i := 0; i < len(queue); i++ {
		for _, c := range children[queue[i]] {
			add(c)
		}
	}
	return queue
}

// holders returns the processes, other than the daemon, with an open file
// descriptor whose /proc link reads target (a /dev/pts path or
// "pipe:[<inode>]").
func holders(target string) []int {
	d, err := os.Open("/proc")
	if err != nil {
		return nil
	}
	names, err := d.Readdirnames(-1)
	_ = d.Close()
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, name := range names {
		pid, err := strconv.Atoi(name)
		if err != nil || pid <= 1 || pid == self {
			continue
		}
		dir := "/proc/" + name + "/fd/"
		fd, err := os.Open(dir)
		if err != nil {
			continue
		}
		fds, _ := fd.Readdirnames(-1)
		_ = fd.Close()
		for _, f := range fds {
			if link, err := os.Readlink(dir + f); err == nil && link == target {
				out = append(out, pid)
				break
			}
		}
	}
	return out
}

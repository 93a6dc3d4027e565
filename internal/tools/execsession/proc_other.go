//go:build unix && !linux

package execsession

import "syscall"

// reapLeader waits for the leader, reaps it and kills the rest of its
// process group.
func reapLeader(p *process) error {
	err := p.cmd.Wait()
	p.killMu.Lock()
	// Without WNOWAIT the group is swept just after the reap, leaving a
	// tiny window in which its id could be reused.
	_ = syscall.Kill(-p.pgid, syscall.SIGKILL)
	p.reaped = true
	p.killMu.Unlock()
	return err
}

// treeMembers finds nothing beyond the process group on systems without a
// /proc process table; kill still signals the group.
func treeMembers(root, pgid, sid int) []int { return nil }

// holders finds nothing without a /proc file table.
func holders(target string) []int { return nil }

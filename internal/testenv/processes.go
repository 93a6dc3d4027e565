package testenv

import (
	"os"
	"strconv"
	"strings"
)

// Processes returns the pids of the live (not zombie) processes whose
// command line, its arguments joined by spaces, is cmdline: for tests that
// check which processes a command left behind, best with an argument no
// other process has (sleep 4711.5).
func Processes(cmdline string) []int {
	ents, _ := os.ReadDir("/proc")
	var out []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile("/proc/" + e.Name() + "/cmdline")
		if err != nil || strings.TrimRight(strings.ReplaceAll(string(b), "\x00", " "), " ") != cmdline {
			continue
		}
		if Alive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

// Alive reports whether pid is a process that has not exited (a zombie
// has).
func Alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	f := strings.Fields(s[strings.LastIndexByte(s, ')')+1:])
	return len(f) > 0 && f[0] != "Z" && f[0] != "X"
}

//go:build unix && !linux

package fsguard

// haveOpenat2 reports whether this build can resolve with openat2.
const haveOpenat2 = false

// openat2Beneath is unavailable outside Linux: callers walk instead.
func openat2Beneath(int, string, int, uint32) (int, bool, error) {
	return -1, false, nil
}

//go:build linux

package applypatch

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// swapperEnv makes the test binary the attacker's helper process instead
// of running tests: it swaps the directory and the symlink named in
// runSwapper below the directory the variable names.
const swapperEnv = "APPLYPATCH_TEST_SWAP_DIR"

func init() {
	if dir := os.Getenv(swapperEnv); dir != "" {
		os.Exit(runSwapper(dir))
	}
}

// runSwapper exchanges dir/d (a directory) and dir/l (a symlink to a
// directory outside the workspace) with renameat2(RENAME_EXCHANGE) until
// it is killed, as the sandboxed command of the attack did.
func runSwapper(dir string) int {
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Println("swapping")
	for {
		if err := unix.Renameat2(fd, "d", fd, "l", unix.RENAME_EXCHANGE); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
	}
}

// startSwapper runs the helper process on dir and returns once it swaps.
func startSwapper(t *testing.T, dir string) (stop func()) {
	t.Helper()
	exe, err := os.Executable()
	require.NoError(t, err)
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), swapperEnv+"="+dir)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	out, err := cmd.StdoutPipe()
	require.NoError(t, err)
	require.NoError(t, cmd.Start())
	line, err := bufio.NewReader(out).ReadString('\n')
	if err != nil {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("swapper did not start: %v", err)
	}
	require.Equal(t, "swapping\n", line)
	return func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
	}
}

// TestApplyRacingSymlinkSwap is the attack of issue 16: while patches
// apply to d/..., another process keeps exchanging the directory d with a
// symlink to a directory outside the workspace. Nothing outside may be
// created, changed or removed, whatever the timing.
func TestApplyRacingSymlinkSwap(t *testing.T) {
	forEachResolver(t, func(t *testing.T, scope Scope) {
		const patches = 1600
		base := t.TempDir()
		root, outside := filepath.Join(base, "root"), filepath.Join(base, "etc")
		// The files updated, deleted and moved exist under both names, so
		// every patch verifies whichever way d points when it is checked.
		files := map[string]string{}
		for i := range patches / 8 {
			for _, prefix := range []string{"u", "x", "m"} {
				files[prefix+strconv.Itoa(i)] = "a\n"
			}
		}
		writeTree(t, filepath.Join(root, "d"), files)
		writeTree(t, outside, files)
		require.NoError(t, os.Symlink(outside, filepath.Join(root, "l")))
		outsideBefore := readTree(t, outside)

		stop := startSwapper(t, root)
		// Bounded in time as well as in count: under -race on a loaded
		// machine the count alone could take long.
		deadline := time.Now().Add(4 * time.Second)
		var tried, applied int
		var added []string
		for i := 0; i < patches && time.Now().Before(deadline); i++ {
			k := strconv.Itoa(i / 8)
			var hunk string
			switch i % 8 {
			case 1:
				hunk = "*** Update File: d/u" + k + "\n@@\n-a\n+changed\n"
			case 3:
				hunk = "*** Delete File: d/x" + k + "\n"
			case 5:
				hunk = "*** Update File: d/m" + k + "\n*** Move to: d/m" + k + ".moved\n@@\n-a\n+moved\n"
			default:
				hunk = "*** Add File: d/p" + strconv.Itoa(i) + "\n+new\n"
			}
			tried++
			p, err := NewPlan(root, scope, "*** Begin Patch\n"+hunk+"*** End Patch")
			if err == nil {
				_, err = p.Apply()
			}
			if err != nil {
				require.NotZero(t, KindOf(err), "%v", err)
				continue
			}
			applied++
			if i%8 != 1 && i%8 != 3 && i%8 != 5 {
				added = append(added, "p"+strconv.Itoa(i))
			}
		}
		stop()

		after := readTree(t, outside)
		var created, changed, removed int
		for path, content := range after {
			before, ok := outsideBefore[path]
			switch {
			case !ok:
				created++
			case before != content:
				changed++
			}
		}
		for path := range outsideBefore {
			if _, ok := after[path]; !ok {
				removed++
			}
		}
		t.Logf("%d patches, %d applied; outside the root: %d files created, %d changed, %d removed",
			tried, applied, created, changed, removed)
		assert.Zero(t, created+changed+removed, "files outside the root were written")
		// What a patch reports as added is inside the root, under whichever
		// name the swapper left its directory.
		dir := filepath.Join(root, "d")
		if fi, err := os.Lstat(dir); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			dir = filepath.Join(root, "l")
		}
		for _, name := range added {
			_, err := os.Lstat(filepath.Join(dir, name))
			assert.NoError(t, err, "added file %s is not in the root", name)
		}
	})
}

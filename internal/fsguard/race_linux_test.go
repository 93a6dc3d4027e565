//go:build linux

package fsguard

import (
	"context"
	"io"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
	"golang.org/x/sys/unix"
)

// swap exchanges dir/a and dir/b with renameat2(RENAME_EXCHANGE) until
// stopped, as a sandboxed command racing the daemon would.
func swap(t *testing.T, dir, a, b string) (stop func()) {
	t.Helper()
	fd, err := unix.Open(dir, unix.O_RDONLY|unix.O_DIRECTORY|unix.O_CLOEXEC, 0)
	require.NoError(t, err)
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer unix.Close(fd)
		for {
			select {
			case <-done:
				return
			default:
			}
			if err := unix.Renameat2(fd, a, fd, b, unix.RENAME_EXCHANGE); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var once sync.Once
	return func() { once.Do(func() { close(done); wg.Wait() }) }
}

// While reads of ws/d/f go on, ws/d keeps being exchanged with a symlink
// to the masked data directory, which holds an f of its own. No read may
// ever return the data directory's file: each is the workspace's file, or
// refused, or fails because the path changed.
func TestOpenReadRacingSymlinkSwap(t *testing.T) {
	forEachResolver(t, func(t *testing.T, walk bool) {
		d := newDaemonFiles(t, walk)
		require.NoError(t, os.Mkdir(filepath.Join(d.ws, "d"), 0o755))
		require.NoError(t, os.WriteFile(filepath.Join(d.ws, "d", "f"), []byte("inside"), 0o644))
		require.NoError(t, os.WriteFile(filepath.Join(d.data, "f"), []byte("secret"), 0o644))
		require.NoError(t, os.Symlink(d.data, filepath.Join(d.ws, "l")))
		a := Dirs(d.ws)
		stop := swap(t, d.ws, "d", "l")
		defer stop()
		deadline := time.Now().Add(2 * time.Second)
		var reads, refused, failed int
		var failure error
		for i := 0; i < 20000 && time.Now().Before(deadline); i++ {
			f, err := d.g.OpenRead(context.Background(), a, filepath.Join(d.ws, "d", "f"))
			switch {
			case err == nil:
				b, err := io.ReadAll(f)
				f.Close()
				require.NoError(t, err)
				require.Equal(t, "inside", string(b), "read the masked file through the swapped symlink")
				reads++
			case isDenied(err):
				refused++
			default:
				failed, failure = failed+1, err
			}
		}
		stop()
		t.Logf("%d reads of the workspace's file, %d refused, %d failed (%v)", reads, refused, failed, failure)
		assert.NotZero(t, reads)
	})
}

func isDenied(err error) bool {
	_, ok := err.(*Error)
	return ok
}

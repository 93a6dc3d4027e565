package pgtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
)

// EnvURL names the variable that points the tests at an existing server; its
// user must be allowed to create databases.
const EnvURL = "APPSERVER_TEST_DATABASE_URL"

// dirPrefix marks the directories of throwaway clusters, so that a
// later run can find and remove those of test binaries that were killed.
const dirPrefix = "pgtest-"

var (
	mu       sync.Mutex
	started  bool
	running  *cluster
	startErr error
)

// errNoBinaries means Postgres is not installed, which skips rather than
// fails the tests outside CI.
var errNoBinaries = errors.New("pgtest: initdb and pg_ctl not found on PATH or in /usr/lib/postgresql/*/bin")

// URL returns the connection URL of a new, empty database that is dropped
// when t and its subtests end. It skips t when Postgres is not installed,
// unless the environment has CI=true, where that is a failure.
func URL(t testing.TB) string {
	t.Helper()
	admin, err := adminURL()
	if err != nil {
		if errors.Is(err, errNoBinaries) && os.Getenv("CI") != "true" {
			t.Skipf("%v; install Postgres or set %s", err, EnvURL)
		}
		t.Fatalf("pgtest: %v", err)
	}
	name := "appserver_test_" + randomHex(6)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := adminExec(ctx, admin, `CREATE DATABASE `+name); err != nil {
		t.Fatalf("pgtest: create database: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// FORCE ends sessions a test leaked instead of failing the drop;
		// servers before Postgres 13 do not know it.
		err := adminExec(ctx, admin, `DROP DATABASE IF EXISTS `+name+` WITH (FORCE)`)
		if err != nil {
			err = adminExec(ctx, admin, `DROP DATABASE IF EXISTS `+name)
		}
		if err != nil {
			t.Errorf("pgtest: drop database %s: %v", name, err)
		}
	})
	return withDatabase(admin, name)
}

// Stop stops the cluster started by URL, if any, and removes its files. It
// is safe to call more than once; URL starts a new cluster afterwards.
func Stop() {
	mu.Lock()
	defer mu.Unlock()
	if running != nil {
		if err := running.stop(); err != nil {
			fmt.Fprintf(os.Stderr, "pgtest: %v\n", err)
		}
	}
	started, running, startErr = false, nil, nil
}

// adminURL returns a URL of a database to issue CREATE and DROP DATABASE on.
func adminURL() (string, error) {
	if u := os.Getenv(EnvURL); u != "" {
		return u, nil
	}
	mu.Lock()
	defer mu.Unlock()
	if !started {
		started = true
		running, startErr = startCluster()
	}
	if startErr != nil {
		return "", startErr
	}
	return running.url, nil
}

func adminExec(ctx context.Context, url, sql string) error {
	conn, err := pgx.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer conn.Close(context.WithoutCancel(ctx))
	_, err = conn.Exec(ctx, sql)
	return err
}

// withDatabase points a URL or a keyword/value connection string at db.
func withDatabase(base, db string) string {
	if strings.HasPrefix(base, "postgres://") || strings.HasPrefix(base, "postgresql://") {
		if u, err := url.Parse(base); err == nil {
			u.Path, u.RawPath = "/"+db, ""
			return u.String()
		}
	}
	// In keyword/value strings the last setting of a key wins.
	return base + " dbname=" + db
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// cluster is a running throwaway Postgres.
type cluster struct {
	dir  string // holds data/, the socket and the log
	bin  string // directory of initdb, pg_ctl and postgres
	cred *syscall.Credential
	url  string
}

func startCluster() (*cluster, error) {
	bin, err := findBinaries()
	if err != nil {
		return nil, err
	}
	// Postgres refuses to run as root: run it as the postgres user then.
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			return nil, fmt.Errorf("running as root and there is no postgres user to run Postgres as: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
	}
	reapStale(bin, cred)
	// A short directory: the socket path must fit in ~107 bytes.
	dir, err := os.MkdirTemp(tempRoot(), dirPrefix)
	if err != nil {
		return nil, err
	}
	c := &cluster{dir: dir, bin: bin, cred: cred}
	if err := c.init(); err != nil {
		_ = os.RemoveAll(dir)
		return nil, err
	}
	return c, nil
}

func (c *cluster) init() error {
	if err := os.WriteFile(filepath.Join(c.dir, "owner.pid"), []byte(strconv.Itoa(os.Getpid())), 0o644); err != nil {
		return err
	}
	if c.cred != nil {
		if err := os.Chown(c.dir, int(c.cred.Uid), int(c.cred.Gid)); err != nil {
			return err
		}
	}
	data := filepath.Join(c.dir, "data")
	// -N skips fsync: the cluster lives as long as the test binary.
	if err := c.run("initdb", "-D", data, "-U", "postgres", "-A", "trust", "-E", "UTF8", "--locale=C", "-N"); err != nil {
		return err
	}
	opts := strings.Join([]string{
		"-c listen_addresses=''",
		"-c unix_socket_directories=" + c.dir,
		"-c fsync=off",
		"-c full_page_writes=off",
		"-c max_connections=200",
	}, " ")
	if err := c.run("pg_ctl", "-D", data, "-l", filepath.Join(c.dir, "log"), "-w", "-t", "30", "-o", opts, "start"); err != nil {
		if log, rerr := os.ReadFile(filepath.Join(c.dir, "log")); rerr == nil {
			err = fmt.Errorf("%w\n%s", err, log)
		}
		return err
	}
	c.url = "postgres://postgres@/postgres?host=" + url.QueryEscape(c.dir) + "&sslmode=disable"
	return nil
}

func (c *cluster) stop() error {
	// The data is thrown away, so there is nothing to shut down cleanly.
	err := c.run("pg_ctl", "-D", filepath.Join(c.dir, "data"), "-m", "immediate", "-w", "stop")
	if rerr := os.RemoveAll(c.dir); rerr != nil && err == nil {
		err = rerr
	}
	return err
}

func (c *cluster) run(name string, args ...string) error {
	cmd := exec.Command(filepath.Join(c.bin, name), args...)
	cmd.Dir = c.dir
	cmd.Env = append(os.Environ(), "LC_ALL=C")
	if c.cred != nil {
		cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred}
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("%s: %w\n%s", name, err, out)
	}
	return nil
}

// findBinaries returns the directory holding initdb and pg_ctl: the one on
// PATH, else the highest version under /usr/lib/postgresql.
func findBinaries() (string, error) {
	if p, err := exec.LookPath("initdb"); err == nil {
		dir := filepath.Dir(p)
		if _, err := os.Stat(filepath.Join(dir, "pg_ctl")); err == nil {
			return dir, nil
		}
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int { return version(b) - version(a) })
	for _, dir := range dirs {
		_, err1 := os.Stat(filepath.Join(dir, "initdb"))
		_, err2 := os.Stat(filepath.Join(dir, "pg_ctl"))
		if err1 == nil && err2 == nil {
			return dir, nil
		}
	}
	return "", errNoBinaries
}

// version extracts N from /usr/lib/postgresql/N/bin, so that 10 sorts above 9.
func version(binDir string) int {
	v, _ := strconv.Atoi(filepath.Base(filepath.Dir(binDir)))
	return v
}

// tempRoots are where clusters live: tmpfs first, because a cluster on a
// disk that other processes keep busy can take seconds to initdb.
var tempRoots = []string{"/dev/shm", "/tmp"}

// tempRoot returns the first of tempRoots with room for a few hundred
// databases (Docker's default /dev/shm of 64 MB has not).
func tempRoot() string {
	for _, root := range tempRoots[:len(tempRoots)-1] {
		var st syscall.Statfs_t
		if err := syscall.Statfs(root, &st); err == nil && st.Bavail*uint64(st.Bsize) >= 2<<30 {
			if f, err := os.CreateTemp(root, dirPrefix+"probe-"); err == nil {
				_ = f.Close()
				_ = os.Remove(f.Name())
				return root
			}
		}
	}
	return tempRoots[len(tempRoots)-1]
}

// reapStale stops and removes the clusters of test binaries that died
// without calling Stop, so that they do not pile up across runs.
func reapStale(bin string, cred *syscall.Credential) {
	var dirs []string
	for _, root := range tempRoots {
		found, _ := filepath.Glob(filepath.Join(root, dirPrefix+"*"))
		dirs = append(dirs, found...)
	}
	for _, dir := range dirs {
		b, err := os.ReadFile(filepath.Join(dir, "owner.pid"))
		if err != nil {
			continue
		}
		pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
		if err != nil || pid <= 0 || !errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) {
			continue
		}
		c := &cluster{dir: dir, bin: bin, cred: cred}
		if _, err := os.Stat(filepath.Join(dir, "data", "postmaster.pid")); err == nil {
			_ = c.run("pg_ctl", "-D", filepath.Join(dir, "data"), "-m", "immediate", "-w", "stop")
		}
		_ = os.RemoveAll(dir)
	}
}

package clientfs

import (
	"context"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/principal"
)

// host is a daemon's files beside a workspace: a data directory (masked)
// holding a store, and a workspace with a file; everything is the
// operator's, the workspace a principal's.
type host struct {
	svc             *Service
	data, ws, other string
	operator, ci    fsguard.Access
}

func newHost(t *testing.T, cfg Config) *host {
	t.Helper()
	base, err := filepath.EvalSymlinks(t.TempDir())
	require.NoError(t, err)
	h := &host{data: filepath.Join(base, "data"), ws: filepath.Join(base, "ws"), other: filepath.Join(base, "other")}
	for p, body := range map[string]string{
		filepath.Join(h.data, "appserver.db"): "SQLite format 3\x00",
		filepath.Join(h.ws, "main.go"):        "package main\n",
		filepath.Join(h.other, "secret.txt"):  "not yours\n",
	} {
		require.NoError(t, os.MkdirAll(filepath.Dir(p), 0o755))
		require.NoError(t, os.WriteFile(p, []byte(body), 0o644))
	}
	g, err := fsguard.New(fsguard.Config{Masked: []string{h.data}})
	require.NoError(t, err)
	cfg.Guard = g
	h.svc = New(cfg)
	t.Cleanup(h.svc.Stop)
	h.operator, err = AccessOf(principal.Operator())
	require.NoError(t, err)
	h.ci = fsguard.Dirs(h.ws)
	return h
}

func b64(s string) string { return base64.StdEncoding.EncodeToString([]byte(s)) }

// requireCode checks err is a domain error of code whose message holds
// text.
func requireCode(t *testing.T, err error, code apperr.Code, text string) {
	t.Helper()
	require.Error(t, err)
	require.Equal(t, code, apperr.CodeOf(err), "%v", err)
	require.Contains(t, apperr.MessageOf(err), text)
}

func TestReadWriteFile(t *testing.T) {
	h := newHost(t, Config{})
	ctx := context.Background()
	p := api.AbsolutePath(filepath.Join(h.ws, "new.txt"))
	_, err := h.svc.WriteFile(ctx, h.ci, api.FsWriteFileParams{Path: p, DataBase64: b64("hi\x00there")})
	require.NoError(t, err)
	res, err := h.svc.ReadFile(ctx, h.ci, api.FsReadFileParams{Path: p})
	require.NoError(t, err)
	require.Equal(t, b64("hi\x00there"), res.DataBase64)

	// A symlink in the workspace is written through, to its target.
	require.NoError(t, os.Symlink("main.go", filepath.Join(h.ws, "link")))
	_, err = h.svc.WriteFile(ctx, h.ci, api.FsWriteFileParams{Path: api.AbsolutePath(filepath.Join(h.ws, "link")), DataBase64: b64("linked")})
	require.NoError(t, err)
	b, err := os.ReadFile(filepath.Join(h.ws, "main.go"))
	require.NoError(t, err)
	require.Equal(t, "linked", string(b))

	_, err = h.svc.ReadFile(ctx, h.ci, api.FsReadFileParams{Path: api.AbsolutePath(filepath.Join(h.ws, "missing"))})
	requireCode(t, err, apperr.Unavailable, "No such file or directory (os error 2)")
	_, err = h.svc.ReadFile(ctx, h.ci, api.FsReadFileParams{Path: api.AbsolutePath(h.ws)})
	requireCode(t, err, apperr.Invalid, "is not a file")
	_, err = h.svc.WriteFile(ctx, h.ci, api.FsWriteFileParams{Path: p, DataBase64: "aGk"})
	requireCode(t, err, apperr.Invalid, "fs/writeFile requires valid base64 dataBase64: Invalid padding")
}

// The daemon's own files are refused to the operator too, whichever
// method names them and however (through a symlink); a principal is held
// to its roots.
func TestPathRule(t *testing.T) {
	h := newHost(t, Config{})
	ctx := context.Background()
	db := filepath.Join(h.data, "appserver.db")
	require.NoError(t, os.Symlink(h.data, filepath.Join(h.ws, "data")))
	require.NoError(t, os.Symlink(h.other, filepath.Join(h.ws, "out")))
	viaLink := filepath.Join(h.ws, "data", "appserver.db")
	for _, a := range []fsguard.Access{h.operator, h.ci} {
		for _, p := range []string{db, viaLink, h.data} {
			ap := api.AbsolutePath(p)
			_, err := h.svc.ReadFile(ctx, a, api.FsReadFileParams{Path: ap})
			requireCode(t, err, apperr.Forbidden, "access denied")
			_, err = h.svc.GetMetadata(ctx, a, api.FsGetMetadataParams{Path: ap})
			requireCode(t, err, apperr.Forbidden, "access denied")
			_, err = h.svc.WriteFile(ctx, a, api.FsWriteFileParams{Path: ap, DataBase64: b64("x")})
			requireCode(t, err, apperr.Forbidden, "access denied")
			_, err = h.svc.Remove(ctx, a, api.FsRemoveParams{Path: ap})
			requireCode(t, err, apperr.Forbidden, "access denied")
			_, err = h.svc.Copy(ctx, a, api.FsCopyParams{SourcePath: ap, DestinationPath: api.AbsolutePath(filepath.Join(h.ws, "stolen"))})
			requireCode(t, err, apperr.Forbidden, "access denied")
		}
		_, err := h.svc.ReadFile(ctx, a, api.FsReadFileParams{Path: "/proc/self/environ"})
		requireCode(t, err, apperr.Forbidden, "protected path of the daemon")
		// The data directory is left out of its parent's listing.
		res, err := h.svc.ReadDirectory(ctx, h.operator, api.FsReadDirectoryParams{Path: api.AbsolutePath(filepath.Dir(h.data))})
		require.NoError(t, err)
		for _, e := range res.Entries {
			require.NotEqual(t, "data", e.FileName)
		}
		// Removing or copying what holds it is refused.
		_, err = h.svc.Remove(ctx, h.operator, api.FsRemoveParams{Path: api.AbsolutePath(filepath.Dir(h.data))})
		requireCode(t, err, apperr.Forbidden, "access denied")
		_, err = os.Stat(filepath.Join(h.ws, "main.go"))
		require.NoError(t, err, "nothing was removed before the refusal")
	}
	_, err := os.Stat(db)
	require.NoError(t, err, "still there")

	// Outside a principal's roots, as named or through a symlink.
	for _, p := range []string{filepath.Join(h.other, "secret.txt"), filepath.Join(h.ws, "out", "secret.txt"), "/etc/hostname"} {
		_, err := h.svc.ReadFile(ctx, h.ci, api.FsReadFileParams{Path: api.AbsolutePath(p)})
		requireCode(t, err, apperr.Forbidden, "outside the workspace roots")
		_, err = h.svc.WriteFile(ctx, h.ci, api.FsWriteFileParams{Path: api.AbsolutePath(p), DataBase64: b64("x")})
		requireCode(t, err, apperr.Forbidden, "outside the workspace roots")
	}
	_, err = h.svc.CreateDirectory(ctx, h.ci, api.FsCreateDirectoryParams{Path: api.AbsolutePath(filepath.Join(h.other, "d"))})
	requireCode(t, err, apperr.Forbidden, "outside the workspace roots")
	_, err = h.svc.Copy(ctx, h.ci, api.FsCopyParams{SourcePath: api.AbsolutePath(filepath.Join(h.ws, "main.go")), DestinationPath: api.AbsolutePath(filepath.Join(h.other, "x"))})
	requireCode(t, err, apperr.Forbidden, "outside the workspace roots")
	_, err = h.svc.Remove(ctx, h.ci, api.FsRemoveParams{Path: api.AbsolutePath(h.ws)})
	require.Error(t, err, "a root is not removed")
	b, err := os.ReadFile(filepath.Join(h.other, "secret.txt"))
	require.NoError(t, err)
	require.Equal(t, "not yours\n", string(b))
	// The operator reaches the same files.
	_, err = h.svc.ReadFile(ctx, h.operator, api.FsReadFileParams{Path: api.AbsolutePath(filepath.Join(h.other, "secret.txt"))})
	require.NoError(t, err)
}

func TestSizeBounds(t *testing.T) {
	h := newHost(t, Config{MaxFileBytes: 8, MaxDirEntries: 2})
	ctx := context.Background()
	big := filepath.Join(h.ws, "big")
	require.NoError(t, os.WriteFile(big, []byte("123456789"), 0o644))
	_, err := h.svc.ReadFile(ctx, h.ci, api.FsReadFileParams{Path: api.AbsolutePath(big)})
	requireCode(t, err, apperr.Invalid, "larger than 8 bytes")
	require.NoError(t, os.WriteFile(big, []byte("12345678"), 0o644))
	_, err = h.svc.ReadFile(ctx, h.ci, api.FsReadFileParams{Path: api.AbsolutePath(big)})
	require.NoError(t, err)
	_, err = h.svc.WriteFile(ctx, h.ci, api.FsWriteFileParams{Path: api.AbsolutePath(big), DataBase64: b64("123456789")})
	requireCode(t, err, apperr.Invalid, "more than 8 bytes")
	_, err = h.svc.WriteFile(ctx, h.ci, api.FsWriteFileParams{Path: api.AbsolutePath(big), DataBase64: b64(strings.Repeat("x", 1000))})
	requireCode(t, err, apperr.Invalid, "more than 8 bytes")
	_, err = h.svc.ReadDirectory(ctx, h.ci, api.FsReadDirectoryParams{Path: api.AbsolutePath(h.ws)})
	require.NoError(t, err, "two entries: main.go, big")
	require.NoError(t, os.WriteFile(filepath.Join(h.ws, "third"), nil, 0o644))
	_, err = h.svc.ReadDirectory(ctx, h.ci, api.FsReadDirectoryParams{Path: api.AbsolutePath(h.ws)})
	requireCode(t, err, apperr.Invalid, "more than 2 entries")
}

func TestDirectoriesAndCopies(t *testing.T) {
	h := newHost(t, Config{})
	ctx := context.Background()
	ws := func(p ...string) api.AbsolutePath {
		return api.AbsolutePath(filepath.Join(append([]string{h.ws}, p...)...))
	}
	_, err := h.svc.CreateDirectory(ctx, h.ci, api.FsCreateDirectoryParams{Path: ws("a", "b", "c")})
	require.NoError(t, err)
	_, err = h.svc.CreateDirectory(ctx, h.ci, api.FsCreateDirectoryParams{Path: ws("a", "b", "c")})
	require.NoError(t, err, "recursive accepts an existing directory")
	no := false
	_, err = h.svc.CreateDirectory(ctx, h.ci, api.FsCreateDirectoryParams{Path: ws("a", "b", "c"), Recursive: &no})
	requireCode(t, err, apperr.Unavailable, "File exists (os error 17)")
	_, err = h.svc.CreateDirectory(ctx, h.ci, api.FsCreateDirectoryParams{Path: ws("main.go")})
	requireCode(t, err, apperr.Unavailable, "File exists (os error 17)")

	require.NoError(t, os.WriteFile(filepath.Join(h.ws, "a", "b", "f"), []byte("f"), 0o600))
	require.NoError(t, os.Symlink("f", filepath.Join(h.ws, "a", "b", "l")))
	_, err = h.svc.Copy(ctx, h.ci, api.FsCopyParams{SourcePath: ws("a"), DestinationPath: ws("copy"), Recursive: true})
	require.NoError(t, err)
	fi, err := os.Stat(filepath.Join(h.ws, "copy", "b", "f"))
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o600), fi.Mode().Perm(), "a copy keeps its permission bits")
	target, err := os.Readlink(filepath.Join(h.ws, "copy", "b", "l"))
	require.NoError(t, err)
	require.Equal(t, "f", target, "a symlink is copied as a symlink")
	_, err = h.svc.Copy(ctx, h.ci, api.FsCopyParams{SourcePath: ws("a"), DestinationPath: ws("a", "b", "in"), Recursive: true})
	requireCode(t, err, apperr.Invalid, "cannot copy a directory to itself")

	md, err := h.svc.GetMetadata(ctx, h.ci, api.FsGetMetadataParams{Path: ws("copy", "b", "l")})
	require.NoError(t, err)
	require.True(t, md.IsSymlink && md.IsFile && !md.IsDirectory && md.ModifiedAtMs > 0)

	no = false
	_, err = h.svc.Remove(ctx, h.ci, api.FsRemoveParams{Path: ws("copy"), Recursive: &no})
	requireCode(t, err, apperr.Unavailable, "Directory not empty (os error 39)")
	_, err = h.svc.Remove(ctx, h.ci, api.FsRemoveParams{Path: ws("copy")})
	require.NoError(t, err)
	_, err = os.Lstat(filepath.Join(h.ws, "copy"))
	require.True(t, os.IsNotExist(err))
	_, err = h.svc.Remove(ctx, h.ci, api.FsRemoveParams{Path: ws("copy"), Force: &no})
	requireCode(t, err, apperr.Unavailable, "No such file or directory (os error 2)")
}

package policy_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

func TestApprovalPolicyStrings(t *testing.T) {
	for s, mode := range map[string]policy.ApprovalMode{
		"untrusted": policy.Untrusted, "on-failure": policy.OnFailure,
		"on-request": policy.OnRequest, "never": policy.Never,
	} {
		p, err := policy.ParseApprovalPolicy(s)
		require.NoError(t, err, s)
		assert.Equal(t, mode, p.Mode)
		assert.Equal(t, s, p.String())
		b, err := json.Marshal(p)
		require.NoError(t, err)
		assert.JSONEq(t, `"`+s+`"`, string(b))
		var back policy.ApprovalPolicy
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, p, back)
	}
	for _, bad := range []string{"", "unless-trusted", "UnlessTrusted", "always", "granular"} {
		_, err := policy.ParseApprovalPolicy(bad)
		assert.Error(t, err, bad)
	}
	var p policy.ApprovalPolicy
	assert.EqualError(t, json.Unmarshal([]byte(`"sometimes"`), &p),
		"unknown variant `sometimes`, expected one of `untrusted`, `on-failure`, `on-request`, `granular`, `never`")
	assert.Equal(t, policy.OnRequest, policy.ApprovalPolicy{}.Mode, "the zero value is on-request")
}

func TestApprovalPolicyGranularJSON(t *testing.T) {
	var p policy.ApprovalPolicy
	require.NoError(t, json.Unmarshal([]byte(`{"granular":{"sandbox_approval":true,"rules":false,"mcp_elicitations":true}}`), &p))
	assert.Equal(t, policy.ApprovalPolicy{Mode: policy.Granular, Granular: policy.GranularApproval{SandboxApproval: true, McpElicitations: true}}, p)
	assert.Equal(t, "granular", p.String())
	b, err := json.Marshal(p)
	require.NoError(t, err)
	assert.JSONEq(t, `{"granular":{"sandbox_approval":true,"rules":false,"skill_approval":false,"request_permissions":false,"mcp_elicitations":true}}`, string(b))

	for _, bad := range []string{
		`{"granular":{"rules":true,"mcp_elicitations":true}}`,
		`{"granular":{"sandbox_approval":true,"mcp_elicitations":true}}`,
		`{"granular":{"sandbox_approval":true,"rules":true}}`,
		`{"other":{}}`,
		`{}`,
		`{"granular":{},"x":1}`,
		`[1]`,
		`3`,
	} {
		assert.Error(t, json.Unmarshal([]byte(bad), &p), bad)
	}
}

func TestSandboxPolicyParsing(t *testing.T) {
	for s, kind := range map[string]policy.SandboxKind{
		"read-only": policy.ReadOnly, "workspace-write": policy.WorkspaceWrite, "danger-full-access": policy.DangerFullAccess,
	} {
		p, err := policy.ParseSandboxMode(s)
		require.NoError(t, err)
		assert.Equal(t, policy.SandboxPolicy{Kind: kind}, p)
		assert.Equal(t, s, p.Mode())
	}
	_, err := policy.ParseSandboxMode("full")
	assert.Error(t, err)

	cases := []struct {
		in   string
		want policy.SandboxPolicy
	}{
		{`"workspace-write"`, policy.SandboxPolicy{Kind: policy.WorkspaceWrite}},
		{`{"type":"readOnly"}`, policy.SandboxPolicy{Kind: policy.ReadOnly}},
		{`{"type":"read-only","network_access":true}`, policy.SandboxPolicy{Kind: policy.ReadOnly, NetworkAccess: true}},
		{`{"type":"dangerFullAccess"}`, policy.SandboxPolicy{Kind: policy.DangerFullAccess}},
		{`{"type":"danger-full-access"}`, policy.SandboxPolicy{Kind: policy.DangerFullAccess}},
		{`{"type":"externalSandbox"}`, policy.SandboxPolicy{Kind: policy.ExternalSandbox}},
		{`{"type":"external-sandbox","network_access":"enabled"}`, policy.SandboxPolicy{Kind: policy.ExternalSandbox, NetworkAccess: true}},
		{`{"type":"externalSandbox","networkAccess":"restricted"}`, policy.SandboxPolicy{Kind: policy.ExternalSandbox}},
		{`{"type":"workspaceWrite","writableRoots":["/a"],"networkAccess":true,"excludeTmpdirEnvVar":true,"excludeSlashTmp":true}`,
			policy.SandboxPolicy{Kind: policy.WorkspaceWrite, WritableRoots: []string{"/a"}, NetworkAccess: true, ExcludeTmpdirEnvVar: true, ExcludeSlashTmp: true}},
		{`{"type":"workspace-write","writable_roots":["/b"],"network_access":false,"exclude_tmpdir_env_var":true,"exclude_slash_tmp":false}`,
			policy.SandboxPolicy{Kind: policy.WorkspaceWrite, WritableRoots: []string{"/b"}, ExcludeTmpdirEnvVar: true}},
		{`{"type":"workspaceWrite","networkAccess":null}`, policy.SandboxPolicy{Kind: policy.WorkspaceWrite}},
	}
	for _, c := range cases {
		var p policy.SandboxPolicy
		require.NoError(t, json.Unmarshal([]byte(c.in), &p), c.in)
		assert.Equal(t, c.want, p, c.in)
		b, err := json.Marshal(p)
		require.NoError(t, err)
		var back policy.SandboxPolicy
		require.NoError(t, json.Unmarshal(b, &back))
		assert.Equal(t, c.want, back, "round trip of %s via %s", c.in, b)
	}
	for _, bad := range []string{`{"type":"sandbox"}`, `{}`, `{"type":"externalSandbox","networkAccess":true}`, `{"type":"readOnly","networkAccess":"yes"}`, `"none"`} {
		var p policy.SandboxPolicy
		assert.Error(t, json.Unmarshal([]byte(bad), &p), bad)
	}
	b, err := json.Marshal(policy.SandboxPolicy{Kind: policy.WorkspaceWrite})
	require.NoError(t, err)
	assert.JSONEq(t, `{"type":"workspaceWrite","writableRoots":[],"networkAccess":false,"excludeTmpdirEnvVar":false,"excludeSlashTmp":false}`, string(b))
}

func TestSandboxAccessFlags(t *testing.T) {
	cases := []struct {
		p                      policy.SandboxPolicy
		fullDisk, fullNet, off bool
	}{
		{policy.SandboxPolicy{Kind: policy.ReadOnly}, false, false, true},
		{policy.SandboxPolicy{Kind: policy.ReadOnly, NetworkAccess: true}, false, true, false},
		{policy.SandboxPolicy{Kind: policy.WorkspaceWrite}, false, false, true},
		{policy.SandboxPolicy{Kind: policy.WorkspaceWrite, NetworkAccess: true}, false, true, false},
		{policy.SandboxPolicy{Kind: policy.DangerFullAccess}, true, true, false},
		{policy.SandboxPolicy{Kind: policy.ExternalSandbox}, true, false, true},
		{policy.SandboxPolicy{Kind: policy.ExternalSandbox, NetworkAccess: true}, true, true, false},
	}
	for _, c := range cases {
		assert.Equal(t, c.fullDisk, c.p.HasFullDiskWriteAccess(), "%+v", c.p)
		assert.Equal(t, !c.fullDisk, c.p.IsRestricted(), "%+v", c.p)
		assert.Equal(t, c.fullNet, c.p.HasFullNetworkAccess(), "%+v", c.p)
		assert.Equal(t, c.off, c.p.NetworkDisabled(), "%+v", c.p)
	}
	assert.Equal(t, "CODEX_SANDBOX_NETWORK_DISABLED", policy.EnvSandboxNetworkDisabled)
}

func mkdir(t *testing.T, p string) {
	t.Helper()
	require.NoError(t, os.MkdirAll(p, 0o755))
}

func TestWritableRootsWithCwd(t *testing.T) {
	cwd := t.TempDir()
	extra := t.TempDir()
	tmpdir := t.TempDir()
	t.Setenv("TMPDIR", tmpdir)
	mkdir(t, filepath.Join(cwd, ".git"))
	mkdir(t, filepath.Join(cwd, ".agents"))
	mkdir(t, filepath.Join(extra, ".codex"))
	require.NoError(t, os.WriteFile(filepath.Join(extra, ".agents"), nil, 0o644)) // a file: not protected

	p := policy.SandboxPolicy{Kind: policy.WorkspaceWrite, WritableRoots: []string{extra, "relative/ignored"}}
	roots := p.WritableRootsWithCwd(cwd)
	var dirs []string
	for _, r := range roots {
		dirs = append(dirs, r.Root)
	}
	want := []string{extra, cwd}
	if fi, err := os.Stat("/tmp"); err == nil && fi.IsDir() {
		want = append(want, "/tmp")
	}
	want = append(want, tmpdir)
	assert.Equal(t, want, dirs)
	assert.Equal(t, []string{filepath.Join(extra, ".codex")}, roots[0].ReadOnlySubpaths)
	// The cwd root protects .codex even when it does not exist.
	assert.Equal(t, []string{filepath.Join(cwd, ".git"), filepath.Join(cwd, ".agents"), filepath.Join(cwd, ".codex")}, roots[1].ReadOnlySubpaths)

	p.ExcludeSlashTmp, p.ExcludeTmpdirEnvVar = true, true
	assert.Len(t, p.WritableRootsWithCwd(cwd), 2)
	assert.Empty(t, policy.SandboxPolicy{Kind: policy.ReadOnly}.WritableRootsWithCwd(cwd))
	assert.Empty(t, policy.SandboxPolicy{Kind: policy.DangerFullAccess}.WritableRootsWithCwd(cwd))

	ws := policy.SandboxPolicy{Kind: policy.WorkspaceWrite, ExcludeSlashTmp: true, ExcludeTmpdirEnvVar: true}
	cases := []struct {
		path string
		ok   bool
	}{
		{"a.txt", true},
		{"sub/dir/a.txt", true},
		{".", true},
		{".git/config", false},
		{".git", false},
		{".gitignore", true},
		{".agents/x", false},
		{".codex", false},
		{".codex/config.toml", false},
		{".codexrc", true},
		{"../outside.txt", false},
		{"sub/../../outside.txt", false},
		{"sub/../inside.txt", true},
		{filepath.Join(extra, "x"), false},
		{"/etc/passwd", false},
	}
	for _, c := range cases {
		assert.Equal(t, c.ok, ws.CanWrite(cwd, c.path), c.path)
	}
	assert.True(t, policy.SandboxPolicy{Kind: policy.DangerFullAccess}.CanWrite(cwd, "/etc/passwd"))
	assert.True(t, policy.SandboxPolicy{Kind: policy.ExternalSandbox}.CanWrite(cwd, "/etc/passwd"))
	assert.False(t, policy.SandboxPolicy{Kind: policy.ReadOnly}.CanWrite(cwd, "a.txt"))
}

func TestWritableRootGitPointerFile(t *testing.T) {
	repo := t.TempDir()
	worktree := t.TempDir()
	gitdir := filepath.Join(repo, ".git", "worktrees", "wt")
	mkdir(t, gitdir)
	require.NoError(t, os.WriteFile(filepath.Join(worktree, ".git"), []byte("gitdir: "+gitdir+"\n"), 0o644))
	r := policy.NewWritableRoot(worktree, false)
	assert.Equal(t, []string{gitdir, filepath.Join(worktree, ".git")}, r.ReadOnlySubpaths)
	assert.False(t, r.IsPathWritable(filepath.Join(worktree, ".git")))
	assert.True(t, r.IsPathWritable(filepath.Join(worktree, "main.go")))

	// A relative pointer resolves against the worktree; a dangling one
	// protects only the .git file.
	wt2 := t.TempDir()
	mkdir(t, filepath.Join(wt2, "real-gitdir"))
	require.NoError(t, os.WriteFile(filepath.Join(wt2, ".git"), []byte("gitdir: real-gitdir"), 0o644))
	assert.Equal(t, []string{filepath.Join(wt2, "real-gitdir"), filepath.Join(wt2, ".git")}, policy.NewWritableRoot(wt2, false).ReadOnlySubpaths)
	wt3 := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(wt3, ".git"), []byte("gitdir: /does/not/exist"), 0o644))
	assert.Equal(t, []string{filepath.Join(wt3, ".git")}, policy.NewWritableRoot(wt3, false).ReadOnlySubpaths)
	wt4 := t.TempDir()
	require.NoError(t, os.WriteFile(filepath.Join(wt4, ".git"), []byte("no pointer here"), 0o644))
	assert.Equal(t, []string{filepath.Join(wt4, ".git")}, policy.NewWritableRoot(wt4, false).ReadOnlySubpaths)
	assert.Empty(t, policy.NewWritableRoot(t.TempDir(), false).ReadOnlySubpaths)
}

func TestWritableRootComponentPrefix(t *testing.T) {
	r := policy.WritableRoot{Root: "/srv/proj", ReadOnlySubpaths: []string{"/srv/proj/.git"}}
	assert.True(t, r.IsPathWritable("/srv/proj"))
	assert.True(t, r.IsPathWritable("/srv/proj/a"))
	assert.False(t, r.IsPathWritable("/srv/project/a"), "component-wise, not string prefix")
	assert.False(t, r.IsPathWritable("/work"))
	assert.True(t, r.IsPathWritable("/srv/proj/.github/x"))
	assert.False(t, r.IsPathWritable("/srv/proj/.git/HEAD"))
	root := policy.WritableRoot{Root: "/"}
	assert.True(t, root.IsPathWritable("/anything"))
	assert.Equal(t, "/a/c", policy.ResolvePath("/a/b", "../c"))
	assert.Equal(t, "/x", policy.ResolvePath("/a/b", "/x/./y/.."))
}

package principal

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// rules builds two principals: alice with the default root under a
// workspaces directory, bob with a configured root; and the daemon's data
// directory beside them.
func rules(t *testing.T, c Ceiling) (r *Rules, workspaces, bobRoot, dataDir string) {
	t.Helper()
	base := t.TempDir()
	workspaces = filepath.Join(base, "workspaces")
	bobRoot = filepath.Join(base, "bob")
	dataDir = filepath.Join(base, "data")
	require.NoError(t, os.Mkdir(bobRoot, 0o700))
	require.NoError(t, os.Mkdir(dataDir, 0o700))
	r, err := New(Config{
		Roots:         map[string][]string{"alice": nil, "bob": {bobRoot}},
		Ceiling:       c,
		WorkspacesDir: workspaces,
		Reserved:      []string{dataDir},
	})
	require.NoError(t, err)
	return r, workspaces, bobRoot, dataDir
}

func get(t *testing.T, r *Rules, name string) Principal {
	t.Helper()
	p, ok := r.Get(name)
	require.True(t, ok)
	return p
}

func requireForbidden(t *testing.T, err error, contains ...string) {
	t.Helper()
	require.Error(t, err)
	require.True(t, apperr.Is(err, apperr.Forbidden), "%v is not Forbidden", err)
	for _, c := range contains {
		require.Contains(t, apperr.MessageOf(err), c)
	}
}

func workspaceWrite() api.SandboxPolicy {
	return api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite}
}

// A principal's paths must resolve inside its roots: "/", the data
// directory, another principal's root and a symlink out of its root are
// refused, with the parameter and the roots named.
func TestBoundRoots(t *testing.T) {
	r, workspaces, bobRoot, dataDir := rules(t, Ceiling{})
	alice := get(t, r, "alice")
	aliceRoot := filepath.Join(workspaces, "alice")

	// No cwd: the default root, created 0700.
	s := Settings{Sandbox: workspaceWrite()}
	require.NoError(t, alice.Bound(&s))
	require.Equal(t, aliceRoot, s.Cwd)
	fi, err := os.Stat(aliceRoot)
	require.NoError(t, err)
	require.Equal(t, os.FileMode(0o700), fi.Mode().Perm())

	sub := filepath.Join(aliceRoot, "proj")
	require.NoError(t, os.Mkdir(sub, 0o700))
	require.NoError(t, os.Symlink("/etc", filepath.Join(aliceRoot, "out")))
	require.NoError(t, os.Symlink(sub, filepath.Join(aliceRoot, "in")))

	for _, tc := range []struct {
		cwd  string
		want string // "" refused
	}{
		{cwd: aliceRoot, want: aliceRoot},
		{cwd: sub, want: sub},
		{cwd: filepath.Join(sub, "not-yet"), want: filepath.Join(sub, "not-yet")},
		{cwd: filepath.Join(aliceRoot, "in"), want: sub},
		{cwd: filepath.Join(aliceRoot, "in", "..", "proj"), want: sub},
		{cwd: "/"},
		{cwd: dataDir},
		{cwd: filepath.Join(dataDir, "rules")},
		{cwd: bobRoot},
		{cwd: workspaces},
		{cwd: filepath.Join(aliceRoot, "out")},
		{cwd: filepath.Join(aliceRoot, "out", "ssl")},
		{cwd: filepath.Join(sub, "..", "..")},
		{cwd: "relative"},
	} {
		s := Settings{Cwd: tc.cwd, Sandbox: workspaceWrite()}
		err := alice.Bound(&s)
		if tc.want == "" {
			requireForbidden(t, err, "cwd", aliceRoot)
			continue
		}
		require.NoError(t, err, tc.cwd)
		require.Equal(t, tc.want, s.Cwd, tc.cwd)
	}

	// Writable roots: a chosen one outside is refused, one the thread
	// only had is dropped.
	s = Settings{Cwd: sub, Sandbox: api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite, WritableRoots: []string{"/etc"}}, SandboxAsked: true, SandboxParam: "sandboxPolicy"}
	requireForbidden(t, alice.Bound(&s), "sandboxPolicy.writableRoots[0]", `"/etc"`)
	s = Settings{Cwd: sub, Sandbox: api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite, WritableRoots: []string{"/etc", filepath.Join(aliceRoot, "in")}}}
	require.NoError(t, alice.Bound(&s))
	require.Equal(t, []string{sub}, s.Sandbox.WritableRoots)

	// Other paths a request names.
	s = Settings{Cwd: sub, Sandbox: workspaceWrite(), Paths: []Path{{Param: "runtimeWorkspaceRoots", Path: bobRoot}}}
	requireForbidden(t, alice.Bound(&s), "runtimeWorkspaceRoots", bobRoot)
	_, err = alice.CheckPath("cwds[0]", dataDir)
	requireForbidden(t, err, "cwds[0]")

	// bob's configured root is not created for him, and is his default.
	bob := get(t, r, "bob")
	s = Settings{Sandbox: workspaceWrite()}
	require.NoError(t, bob.Bound(&s))
	require.Equal(t, bobRoot, s.Cwd)
	s = Settings{Cwd: aliceRoot, Sandbox: workspaceWrite()}
	requireForbidden(t, bob.Bound(&s), "cwd")

	// The operator is not bounded.
	s = Settings{Cwd: "/", Sandbox: api.SandboxPolicy{Type: api.SandboxPolicyDangerFullAccess}, SandboxAsked: true}
	require.NoError(t, Operator().Bound(&s))
	require.Equal(t, "/", s.Cwd)
}

// A root whose symlink is re-pointed at the daemon's state after start-up
// still never reaches it.
func TestBoundRepointedRoot(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data")
	require.NoError(t, os.Mkdir(data, 0o700))
	link := filepath.Join(base, "ws")
	require.NoError(t, os.Symlink(filepath.Join(base, "elsewhere"), link))
	r, err := New(Config{Roots: map[string][]string{"a": {link}}, Reserved: []string{data}})
	require.NoError(t, err)
	require.NoError(t, os.Remove(link))
	require.NoError(t, os.Symlink(base, link))
	s := Settings{Cwd: link, Sandbox: workspaceWrite()}
	requireForbidden(t, get(t, r, "a").Bound(&s), "reaches the daemon's own files")
}

// The ceiling: what a request chose beyond it is refused, what it left as
// it was is lowered.
func TestBoundCeiling(t *testing.T) {
	pol := func(p api.ApprovalPolicy) api.AskForApproval { return api.AskForApproval{Policy: p} }
	full := api.SandboxPolicy{Type: api.SandboxPolicyDangerFullAccess}
	for _, tc := range []struct {
		name      string
		c         Ceiling
		s         Settings
		wantS     api.SandboxPolicyType
		wantNet   bool
		wantA     api.ApprovalPolicy
		forbidden string
	}{
		{name: "defaults within", s: Settings{Sandbox: api.SandboxPolicy{Type: api.SandboxPolicyReadOnly}, Approval: pol(api.ApprovalOnRequest)},
			wantS: api.SandboxPolicyReadOnly, wantA: api.ApprovalOnRequest},
		{name: "full access asked", s: Settings{Sandbox: full, SandboxAsked: true, SandboxParam: "permissions", Approval: pol(api.ApprovalNever)},
			forbidden: `permissions "danger-full-access" is beyond this principal's ceiling "workspace-write"`},
		{name: "external sandbox asked", s: Settings{Sandbox: api.SandboxPolicy{Type: api.SandboxPolicyExternalSandbox}, SandboxAsked: true},
			forbidden: `"externalSandbox" is beyond`},
		{name: "full access default lowered", s: Settings{Sandbox: full, Approval: pol(api.ApprovalNever)},
			wantS: api.SandboxPolicyWorkspaceWrite, wantA: api.ApprovalNever},
		{name: "read-only ceiling lowers the default", c: Ceiling{MaxSandbox: api.SandboxReadOnly}, s: Settings{Sandbox: workspaceWrite(), Approval: pol(api.ApprovalNever)},
			wantS: api.SandboxPolicyReadOnly, wantA: api.ApprovalNever},
		{name: "network asked", s: Settings{Sandbox: api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite, NetworkAccess: true}, SandboxAsked: true},
			forbidden: "network access is beyond"},
		{name: "network kept turned off", s: Settings{Sandbox: api.SandboxPolicy{Type: api.SandboxPolicyReadOnly, NetworkAccess: true}, Approval: pol(api.ApprovalNever)},
			wantS: api.SandboxPolicyReadOnly, wantA: api.ApprovalNever},
		{name: "network under full access", c: Ceiling{MaxSandbox: api.SandboxDangerFullAccess}, s: Settings{Sandbox: api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite, NetworkAccess: true}, SandboxAsked: true, Approval: pol(api.ApprovalNever)},
			wantS: api.SandboxPolicyWorkspaceWrite, wantNet: true, wantA: api.ApprovalNever},
		{name: "approval over", c: Ceiling{MaxApproval: api.ApprovalOnRequest}, s: Settings{Sandbox: workspaceWrite(), Approval: pol(api.ApprovalNever), ApprovalAsked: true},
			forbidden: `approval policy "never" is beyond`},
		{name: "on-failure over on-request", c: Ceiling{MaxApproval: api.ApprovalOnRequest}, s: Settings{Sandbox: workspaceWrite(), Approval: pol("on-failure"), ApprovalAsked: true},
			forbidden: "beyond"},
		{name: "default approval lowered", c: Ceiling{MaxApproval: api.ApprovalUntrusted}, s: Settings{Sandbox: workspaceWrite(), Approval: pol(api.ApprovalNever)},
			wantS: api.SandboxPolicyWorkspaceWrite, wantA: api.ApprovalUntrusted},
		{name: "granular counts as on-request", c: Ceiling{MaxApproval: api.ApprovalUntrusted}, s: Settings{Sandbox: workspaceWrite(), Approval: api.AskForApproval{Granular: &api.GranularApproval{}}, ApprovalAsked: true},
			forbidden: "approval policy granular is beyond"},
		{name: "full access and never asked for", c: Ceiling{MaxSandbox: api.SandboxDangerFullAccess}, s: Settings{Sandbox: full, SandboxAsked: true, Approval: pol(api.ApprovalNever), ApprovalAsked: true},
			forbidden: `needs principal_max_approval = "never"`},
		{name: "full access, never by default", c: Ceiling{MaxSandbox: api.SandboxDangerFullAccess}, s: Settings{Sandbox: full, SandboxAsked: true, Approval: pol(api.ApprovalNever)},
			wantS: api.SandboxPolicyDangerFullAccess, wantA: api.ApprovalOnRequest},
		{name: "full access and never granted", c: Ceiling{MaxSandbox: api.SandboxDangerFullAccess, MaxApproval: api.ApprovalNever, AllowNeverWithFullAccess: true},
			s: Settings{Sandbox: full, SandboxAsked: true, Approval: pol(api.ApprovalNever), ApprovalAsked: true}, wantS: api.SandboxPolicyDangerFullAccess, wantA: api.ApprovalNever},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r, _, _, _ := rules(t, tc.c)
			s := tc.s
			err := get(t, r, "alice").Bound(&s)
			if tc.forbidden != "" {
				requireForbidden(t, err, tc.forbidden)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.wantS, s.Sandbox.Type)
			require.Equal(t, tc.wantNet, s.Sandbox.NetworkAccess)
			require.Equal(t, tc.wantA, s.Approval.Policy)
		})
	}
}

func TestNewRefusesBadRoots(t *testing.T) {
	base := t.TempDir()
	data := filepath.Join(base, "data")
	for _, tc := range []struct {
		name  string
		cfg   Config
		error string
	}{
		{"bad name", Config{Roots: map[string][]string{"a b": {base}}}, "names are 1-64 characters"},
		{"relative", Config{Roots: map[string][]string{"a": {"ws"}}}, "not an absolute path"},
		{"root", Config{Roots: map[string][]string{"a": {"/"}}}, "whole file system"},
		{"around the data dir", Config{Roots: map[string][]string{"a": {base}}, Reserved: []string{data}}, "overlaps the daemon's own"},
		{"inside the data dir", Config{Roots: map[string][]string{"a": {filepath.Join(data, "ws")}}, Reserved: []string{data}}, "overlaps the daemon's own"},
		{"overlapping principals", Config{Roots: map[string][]string{"a": {base}, "b": {filepath.Join(base, "b")}}}, "overlapping workspace roots"},
		{"no default directory", Config{Roots: map[string][]string{"a": nil}}, "principal_workspaces"},
		{"bad ceiling", Config{Ceiling: Ceiling{MaxSandbox: "wide-open"}}, "principal_max_sandbox"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.cfg)
			require.ErrorContains(t, err, tc.error)
		})
	}
}

func TestVisibility(t *testing.T) {
	r, _, _, _ := rules(t, Ceiling{})
	alice, bob := get(t, r, "alice"), get(t, r, "bob")
	orig := alice.Originator()
	require.Equal(t, "appserver-http/alice", orig)
	require.Equal(t, "alice", NameOf(orig))
	require.Equal(t, "", NameOf("codex-tui"))
	th := api.Thread{Originator: &orig}
	require.True(t, alice.Sees(th))
	require.False(t, bob.Sees(th))
	require.True(t, Operator().Sees(th))
	require.False(t, alice.Sees(api.Thread{}), "a thread without originator is the operator's")
	require.Equal(t, "codex-tui", Operator().ClientName("codex-tui"))
	require.Equal(t, orig, alice.ClientName("codex-tui"))
	_, ok := r.Get("carol")
	require.False(t, ok)
}

func TestMayRunUnsandboxed(t *testing.T) {
	r, _, _, _ := rules(t, Ceiling{MaxSandbox: api.SandboxDangerFullAccess})
	requireForbidden(t, get(t, r, "alice").MayRunUnsandboxed("thread/shellCommand"), "thread/shellCommand runs commands unsandboxed")
	r, _, _, _ = rules(t, Ceiling{MaxSandbox: api.SandboxDangerFullAccess, MaxApproval: api.ApprovalNever, AllowNeverWithFullAccess: true})
	require.NoError(t, get(t, r, "alice").MayRunUnsandboxed("thread/shellCommand"))
	require.NoError(t, Operator().MayRunUnsandboxed("thread/shellCommand"))
}

// The access log names a principal by its name and the operator by a name
// no principal can have.
func TestLogName(t *testing.T) {
	r, _, _, _ := rules(t, Ceiling{})
	require.Equal(t, "alice", get(t, r, "alice").LogName())
	require.Equal(t, OperatorLogName, Operator().LogName())
	require.False(t, NameRE.MatchString(OperatorLogName))
	_, err := New(Config{Roots: map[string][]string{OperatorLogName: {t.TempDir()}}})
	require.Error(t, err)
}

func TestCommandSandbox(t *testing.T) {
	for _, tc := range []struct {
		ceiling Ceiling
		want    api.SandboxPolicyType
	}{
		{Ceiling{}, api.SandboxPolicyWorkspaceWrite},
		{Ceiling{MaxSandbox: api.SandboxReadOnly}, api.SandboxPolicyReadOnly},
		{Ceiling{MaxSandbox: api.SandboxWorkspaceWrite}, api.SandboxPolicyWorkspaceWrite},
		// Unsandboxed and unasked takes the explicit grant.
		{Ceiling{MaxSandbox: api.SandboxDangerFullAccess}, api.SandboxPolicyWorkspaceWrite},
		{Ceiling{MaxSandbox: api.SandboxDangerFullAccess, MaxApproval: api.ApprovalNever, AllowNeverWithFullAccess: true}, api.SandboxPolicyDangerFullAccess},
	} {
		r, _, _, _ := rules(t, tc.ceiling)
		pol, ok := get(t, r, "alice").CommandSandbox()
		require.True(t, ok)
		require.Equal(t, tc.want, pol.Type, "%+v", tc.ceiling)
		require.False(t, pol.NetworkAccess, "%+v", tc.ceiling)
	}
	_, ok := Operator().CommandSandbox()
	require.False(t, ok)
}

package policy

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
)

// SandboxKind is the kind of sandbox policy (docs/tools.md §4.2).
type SandboxKind int

// The sandbox kinds. The zero value is ReadOnly, the most restrictive.
const (
	// ReadOnly allows reads everywhere and no writes.
	ReadOnly SandboxKind = iota
	// WorkspaceWrite allows writes under the writable roots.
	WorkspaceWrite
	// DangerFullAccess runs without a sandbox.
	DangerFullAccess
	// ExternalSandbox means isolation is provided outside Codex; treated as
	// full access.
	ExternalSandbox
)

// EnvSandboxNetworkDisabled is set to "1" in a child's environment when the
// sandbox cuts the network; tools and tests key on this exact name.
const EnvSandboxNetworkDisabled = "CODEX_SANDBOX_NETWORK_DISABLED"

// SandboxPolicy is a sandbox policy with the fields of its kind.
type SandboxPolicy struct {
	// Kind selects the policy.
	Kind SandboxKind
	// WritableRoots are extra writable roots (WorkspaceWrite).
	WritableRoots []string
	// NetworkAccess turns the network on (ReadOnly, WorkspaceWrite); for
	// ExternalSandbox it means "enabled" rather than "restricted".
	NetworkAccess bool
	// ExcludeTmpdirEnvVar drops $TMPDIR from the writable roots.
	ExcludeTmpdirEnvVar bool
	// ExcludeSlashTmp drops /tmp from the writable roots.
	ExcludeSlashTmp bool
}

// ParseSandboxMode maps the config/CLI sandbox_mode string to a policy with
// default fields.
func ParseSandboxMode(s string) (SandboxPolicy, error) {
	switch s {
	case "read-only":
		return SandboxPolicy{Kind: ReadOnly}, nil
	case "workspace-write":
		return SandboxPolicy{Kind: WorkspaceWrite}, nil
	case "danger-full-access":
		return SandboxPolicy{Kind: DangerFullAccess}, nil
	}
	return SandboxPolicy{}, fmt.Errorf("unknown variant `%s`, expected one of `read-only`, `workspace-write`, `danger-full-access`", s)
}

// Mode returns the sandbox_mode string of the policy ("external-sandbox" for
// ExternalSandbox, which has no sandbox_mode).
func (p SandboxPolicy) Mode() string {
	switch p.Kind {
	case WorkspaceWrite:
		return "workspace-write"
	case DangerFullAccess:
		return "danger-full-access"
	case ExternalSandbox:
		return "external-sandbox"
	default:
		return "read-only"
	}
}

// HasFullDiskWriteAccess reports whether the file system is unrestricted
// (danger-full-access or an external sandbox).
func (p SandboxPolicy) HasFullDiskWriteAccess() bool {
	return p.Kind == DangerFullAccess || p.Kind == ExternalSandbox
}

// IsRestricted reports whether Codex's own sandbox restricts the file system
// (read-only or workspace-write).
func (p SandboxPolicy) IsRestricted() bool { return !p.HasFullDiskWriteAccess() }

// HasFullNetworkAccess reports whether commands may use the network.
func (p SandboxPolicy) HasFullNetworkAccess() bool {
	return p.Kind == DangerFullAccess || p.NetworkAccess
}

// NetworkDisabled reports whether a child must see EnvSandboxNetworkDisabled=1.
func (p SandboxPolicy) NetworkDisabled() bool { return !p.HasFullNetworkAccess() }

// The "type" tags accepted on input: kebab-case (core, config) and camelCase
// (app-server v2).
var sandboxTypeNames = map[string]SandboxKind{
	"read-only": ReadOnly, "readOnly": ReadOnly,
	"workspace-write": WorkspaceWrite, "workspaceWrite": WorkspaceWrite,
	"danger-full-access": DangerFullAccess, "dangerFullAccess": DangerFullAccess,
	"external-sandbox": ExternalSandbox, "externalSandbox": ExternalSandbox,
}

// MarshalJSON writes the app-server v2 (camelCase) object with every field of
// the selected kind.
func (p SandboxPolicy) MarshalJSON() ([]byte, error) {
	switch p.Kind {
	case ReadOnly:
		return json.Marshal(struct {
			Type          string `json:"type"`
			NetworkAccess bool   `json:"networkAccess"`
		}{"readOnly", p.NetworkAccess})
	case WorkspaceWrite:
		roots := p.WritableRoots
		if roots == nil {
			roots = []string{}
		}
		return json.Marshal(struct {
			Type                string   `json:"type"`
			WritableRoots       []string `json:"writableRoots"`
			NetworkAccess       bool     `json:"networkAccess"`
			ExcludeTmpdirEnvVar bool     `json:"excludeTmpdirEnvVar"`
			ExcludeSlashTmp     bool     `json:"excludeSlashTmp"`
		}{"workspaceWrite", roots, p.NetworkAccess, p.ExcludeTmpdirEnvVar, p.ExcludeSlashTmp})
	case ExternalSandbox:
		na := "restricted"
		if p.NetworkAccess {
			na = "enabled"
		}
		return json.Marshal(struct {
			Type          string `json:"type"`
			NetworkAccess string `json:"networkAccess"`
		}{"externalSandbox", na})
	default:
		return json.Marshal(struct {
			Type string `json:"type"`
		}{"dangerFullAccess"})
	}
}

// UnmarshalJSON accepts a bare sandbox_mode string, or a policy object tagged
// by "type" in either the core (kebab-case type, snake_case fields) or the v2
// (camelCase) spelling; missing fields take their defaults.
func (p *SandboxPolicy) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		v, err := ParseSandboxMode(s)
		if err != nil {
			return err
		}
		*p = v
		return nil
	}
	var w map[string]json.RawMessage
	if err := json.Unmarshal(b, &w); err != nil {
		return fmt.Errorf("sandbox policy: %w", err)
	}
	var typ string
	if raw, ok := w["type"]; !ok {
		return fmt.Errorf("missing field `type`")
	} else if err := json.Unmarshal(raw, &typ); err != nil {
		return fmt.Errorf("sandbox policy type: %w", err)
	}
	kind, ok := sandboxTypeNames[typ]
	if !ok {
		return fmt.Errorf("unknown variant `%s`, expected one of `dangerFullAccess`, `readOnly`, `externalSandbox`, `workspaceWrite`", typ)
	}
	field := func(names ...string) json.RawMessage {
		for _, n := range names {
			if v, ok := w[n]; ok && string(bytes.TrimSpace(v)) != "null" {
				return v
			}
		}
		return nil
	}
	out := SandboxPolicy{Kind: kind}
	if raw := field("networkAccess", "network_access"); raw != nil {
		if kind == ExternalSandbox {
			var s string
			if err := json.Unmarshal(raw, &s); err != nil {
				return fmt.Errorf("networkAccess: %w", err)
			}
			switch s {
			case "restricted":
			case "enabled":
				out.NetworkAccess = true
			default:
				return fmt.Errorf("unknown variant `%s`, expected `restricted` or `enabled`", s)
			}
		} else if err := json.Unmarshal(raw, &out.NetworkAccess); err != nil {
			return fmt.Errorf("networkAccess: %w", err)
		}
	}
	if kind == WorkspaceWrite {
		if raw := field("writableRoots", "writable_roots"); raw != nil {
			if err := json.Unmarshal(raw, &out.WritableRoots); err != nil {
				return fmt.Errorf("writableRoots: %w", err)
			}
			if len(out.WritableRoots) == 0 {
				out.WritableRoots = nil
			}
		}
		if raw := field("excludeTmpdirEnvVar", "exclude_tmpdir_env_var"); raw != nil {
			if err := json.Unmarshal(raw, &out.ExcludeTmpdirEnvVar); err != nil {
				return fmt.Errorf("excludeTmpdirEnvVar: %w", err)
			}
		}
		if raw := field("excludeSlashTmp", "exclude_slash_tmp"); raw != nil {
			if err := json.Unmarshal(raw, &out.ExcludeSlashTmp); err != nil {
				return fmt.Errorf("excludeSlashTmp: %w", err)
			}
		}
	}
	*p = out
	return nil
}

// WritableRoot is a directory the sandbox lets commands write under, minus
// subpaths that stay read-only.
type WritableRoot struct {
	// Root is the absolute, cleaned root directory.
	Root string
	// ReadOnlySubpaths stay read-only although they are under Root.
	ReadOnlySubpaths []string
}

// IsPathWritable reports whether the absolute path p is under the root and
// under none of its read-only subpaths (component-wise prefixes).
func (r WritableRoot) IsPathWritable(p string) bool {
	if !pathHasPrefix(p, r.Root) {
		return false
	}
	for _, ro := range r.ReadOnlySubpaths {
		if pathHasPrefix(p, ro) {
			return false
		}
	}
	return true
}

// NewWritableRoot builds a writable root for dir with the default protected
// subpaths: .git (the directory, or the .git file and the gitdir it points
// to), .agents when it is a directory, and .codex when it is a directory or,
// with protectMissingCodex (the cwd root), even when it does not exist yet.
func NewWritableRoot(dir string, protectMissingCodex bool) WritableRoot {
	root := filepath.Clean(dir)
	var sub []string
	seen := map[string]bool{}
	add := func(p string) {
		if !seen[p] {
			seen[p] = true
			sub = append(sub, p)
		}
	}
	git := filepath.Join(root, ".git")
	if fi, err := os.Stat(git); err == nil {
		if fi.Mode().IsRegular() {
			if gitdir, ok := resolveGitdirFile(git); ok {
				add(gitdir)
			}
		}
		if fi.IsDir() || fi.Mode().IsRegular() {
			add(git)
		}
	}
	if isDir(filepath.Join(root, ".agents")) {
		add(filepath.Join(root, ".agents"))
	}
	codex := filepath.Join(root, ".codex")
	if protectMissingCodex || isDir(codex) {
		add(codex)
	}
	return WritableRoot{Root: root, ReadOnlySubpaths: sub}
}

// WritableRootsWithCwd resolves the effective writable roots of a
// workspace-write policy for cwd: configured roots, then cwd, then /tmp (if it
// is a directory and not excluded), then $TMPDIR (if set, absolute and not
// excluded). Other kinds have none: read-only cannot write, and full access
// needs no list.
func (p SandboxPolicy) WritableRootsWithCwd(cwd string) []WritableRoot {
	dirs := p.WritableRootDirs(cwd)
	cwdRoot := ""
	if filepath.IsAbs(cwd) {
		cwdRoot = filepath.Clean(cwd)
	}
	roots := make([]WritableRoot, 0, len(dirs))
	for _, d := range dirs {
		roots = append(roots, NewWritableRoot(d, cwdRoot != "" && d == cwdRoot))
	}
	return roots
}

// WritableRootDirs is WritableRootsWithCwd without the read-only subpaths:
// the directories alone, found without looking into them.
func (p SandboxPolicy) WritableRootDirs(cwd string) []string {
	if p.Kind != WorkspaceWrite {
		return nil
	}
	var dirs []string
	for _, r := range p.WritableRoots {
		if filepath.IsAbs(r) {
			dirs = append(dirs, filepath.Clean(r))
		}
	}
	if filepath.IsAbs(cwd) {
		dirs = append(dirs, filepath.Clean(cwd))
	}
	if !p.ExcludeSlashTmp && isDir("/tmp") {
		dirs = append(dirs, "/tmp")
	}
	if !p.ExcludeTmpdirEnvVar {
		if t := os.Getenv("TMPDIR"); t != "" && filepath.IsAbs(t) {
			dirs = append(dirs, filepath.Clean(t))
		}
	}
	return dirs
}

// CanWrite reports whether the policy lets a sandboxed command write path
// (resolved lexically against cwd): always under full access, never under
// read-only, and under workspace-write when some writable root allows it.
func (p SandboxPolicy) CanWrite(cwd, path string) bool {
	switch p.Kind {
	case DangerFullAccess, ExternalSandbox:
		return true
	case ReadOnly:
		return false
	}
	return anyRootWritable(p.WritableRootsWithCwd(cwd), ResolvePath(cwd, path))
}

func anyRootWritable(roots []WritableRoot, abs string) bool {
	for _, r := range roots {
		if r.IsPathWritable(abs) {
			return true
		}
	}
	return false
}

// ResolvePath makes p absolute against cwd and removes "." and ".." lexically,
// without touching the file system (the path need not exist).
func ResolvePath(cwd, p string) string {
	if !filepath.IsAbs(p) {
		p = filepath.Join(cwd, p)
	}
	return filepath.Clean(p)
}

// pathHasPrefix reports whether p equals prefix or lies below it, comparing
// whole path components.
func pathHasPrefix(p, prefix string) bool {
	p, prefix = filepath.Clean(p), filepath.Clean(prefix)
	if p == prefix {
		return true
	}
	if prefix == string(filepath.Separator) {
		return strings.HasPrefix(p, prefix)
	}
	return strings.HasPrefix(p, prefix+string(filepath.Separator))
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// resolveGitdirFile reads a "gitdir: <path>" pointer file and returns the
// existing directory it names, resolved against the file's directory.
func resolveGitdirFile(dotGit string) (string, bool) {
	b, err := os.ReadFile(dotGit)
	if err != nil {
		return "", false
	}
	_, raw, ok := strings.Cut(strings.TrimSpace(string(b)), ":")
	raw = strings.TrimSpace(raw)
	if !ok || raw == "" {
		return "", false
	}
	gitdir := ResolvePath(filepath.Dir(dotGit), raw)
	if _, err := os.Stat(gitdir); err != nil {
		return "", false
	}
	return gitdir, true
}

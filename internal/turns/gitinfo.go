package turns

import (
	"bufio"
	"io"
	"os"
	"path/filepath"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/store"
)

// recordGitInfo records the Git metadata of cwd with a thread that has
// had no turn yet and none recorded (thread/metadata/update may have set
// it), and returns the patch that stores it; nil when there is nothing to
// record. t.metaMu must be held.
func (t *thread) recordGitInfo(cwd string, roots []string) *store.ThreadPatch {
	t.mu.Lock()
	first := t.meta.GitInfo == nil && t.meta.LastTurnID == ""
	t.mu.Unlock()
	if !first {
		return nil
	}
	info := gitInfoOf(cwd, roots)
	if info == nil {
		return nil
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.meta.GitInfo = info
	return &store.ThreadPatch{ID: t.id, Meta: t.metaJSONLocked()}
}

// gitFileLimit bounds what is read of one Git metadata file (HEAD, a ref,
// config, packed-refs): the repository is the client's, not the daemon's.
const gitFileLimit = 4 << 20

// gitInfoOf is the Git metadata of the repository holding dir, as the
// reference records it with a thread at its first turn: the commit HEAD
// names, the branch checked out (none when detached) and the URL of the
// remote "origin". It reads the repository's files and runs no git
// command, so nothing of the repository's configuration (hooks, fsmonitor)
// runs. The search for the repository goes up from dir and, for a
// principal with workspace roots, stops at the root holding dir: a
// repository above it is none of the principal's. Nil when no repository
// is found or it tells nothing.
func gitInfoOf(dir string, roots []string) *api.GitInfo {
	gitDir := findGitDir(filepath.Clean(dir), roots)
	if gitDir == "" {
		return nil
	}
	common := gitDir
	if c, ok := readGitFile(filepath.Join(gitDir, "commondir")); ok {
		common = relTo(gitDir, c)
	}
	var info api.GitInfo
	if head, ok := readGitFile(filepath.Join(gitDir, "HEAD")); ok {
		if ref, isRef := strings.CutPrefix(head, "ref: "); isRef {
			if branch, ok := strings.CutPrefix(ref, "refs/heads/"); ok {
				info.Branch = &branch
			}
			if sha := resolveRef(gitDir, common, ref); sha != "" {
				info.Sha = &sha
			}
		} else if isSha(head) {
			info.Sha = &head
		}
	}
	if url := originURL(filepath.Join(common, "config")); url != "" {
		info.OriginURL = &url
	}
	if info == (api.GitInfo{}) {
		return nil
	}
	return &info
}

// findGitDir returns the Git directory of the repository holding dir ("" when
// none): dir/.git, a directory, or a file naming it ("gitdir: …", a
// worktree's or a submodule's), looked for in dir and its parents up to
// the root of roots that holds dir (or the file system's root).
func findGitDir(dir string, roots []string) string {
	stop := ""
	for _, r := range roots {
		if rel, err := filepath.Rel(r, dir); err == nil && rel != ".." && !strings.HasPrefix(rel, ".."+string(filepath.Separator)) {
			stop = r
			break
		}
	}
	if len(roots) > 0 && stop == "" {
		return ""
	}
	for {
		dotGit := filepath.Join(dir, ".git")
		if fi, err := os.Stat(dotGit); err == nil {
			if fi.IsDir() {
				return dotGit
			}
			if s, ok := readGitFile(dotGit); ok {
				if d, ok := strings.CutPrefix(s, "gitdir: "); ok {
					return relTo(dir, d)
				}
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if dir == stop || parent == dir {
			return ""
		}
		dir = parent
	}
}

// relTo resolves p, relative to base unless absolute.
func relTo(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

// readGitFile reads a small Git file's first line, trimmed.
func readGitFile(path string) (string, bool) {
	f, err := os.Open(path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	line, err := bufio.NewReader(io.LimitReader(f, gitFileLimit)).ReadString('\n')
	if err != nil && err != io.EOF {
		return "", false
	}
	line = strings.TrimSpace(line)
	return line, line != ""
}

// resolveRef is the commit a ref names: its loose file (in the worktree's
// Git directory or the common one), else its line in packed-refs.
func resolveRef(gitDir, common, ref string) string {
	if !validRef(ref) {
		return ""
	}
	for _, d := range []string{gitDir, common} {
		if s, ok := readGitFile(filepath.Join(d, filepath.FromSlash(ref))); ok && isSha(s) {
			return s
		}
	}
	f, err := os.Open(filepath.Join(common, "packed-refs"))
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, gitFileLimit))
	for sc.Scan() {
		sha, name, ok := strings.Cut(sc.Text(), " ")
		if ok && name == ref && isSha(sha) {
			return sha
		}
	}
	return ""
}

// validRef keeps a ref read from HEAD inside the Git directory.
func validRef(ref string) bool {
	if !strings.HasPrefix(ref, "refs/") {
		return false
	}
	for _, part := range strings.Split(ref, "/") {
		if part == "" || part == "." || part == ".." {
			return false
		}
	}
	return true
}

// isSha reports whether s is a full commit id (SHA-1 or SHA-256, hex).
func isSha(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for _, c := range s {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// originURL is the url of [remote "origin"] in a Git config file, "" when
// it has none.
func originURL(path string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(io.LimitReader(f, gitFileLimit))
	inOrigin := false
	for sc.Scan() {
		line := strings.TrimSpace(sc.Text())
		if strings.HasPrefix(line, "[") {
			inOrigin = strings.EqualFold(strings.Join(strings.Fields(strings.Trim(line, "[]")), " "), `remote "origin"`)
			continue
		}
		if !inOrigin {
			continue
		}
		key, value, ok := strings.Cut(line, "=")
		if ok && strings.EqualFold(strings.TrimSpace(key), "url") {
			return strings.Trim(strings.TrimSpace(value), `"`)
		}
	}
	return ""
}

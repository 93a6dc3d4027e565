package clientfs

import (
	"context"
	"io"
	"path/filepath"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/fsguard"
)

// The other agent's files the migration reads, and what it writes.
const (
	externalAgentDir = ".claude"
	externalAgentMd  = "CLAUDE.md"
	agentsMd         = "AGENTS.md"
)

// DetectExternalAgent answers externalAgentConfig/detect for what a may
// reach: for each cwd, the repository holding it (the nearest directory
// above with a .git, else the cwd itself) offers an AGENTS_MD item when it
// has a non-empty CLAUDE.md (at its top or in .claude/) and no AGENTS.md
// with text. Nothing else of the other agent is detected, the home's
// files included: appserver has no user-level AGENTS.md, skills, MCP or
// settings of the other agent's kind to migrate them into. A cwd a
// principal may not read is passed over, as one that does not exist is.
func (s *Service) DetectExternalAgent(ctx context.Context, a fsguard.Access, p api.ExternalAgentConfigDetectParams) (api.ExternalAgentConfigDetectResult, error) {
	res := api.ExternalAgentConfigDetectResult{}
	for _, cwd := range p.Cwds {
		if err := ctx.Err(); err != nil {
			return res, err
		}
		repo, ok := s.repoRoot(ctx, a, cwd)
		if !ok {
			continue
		}
		source, target, ok := s.agentsMdMigration(ctx, a, repo)
		if !ok {
			continue
		}
		res.Items = append(res.Items, api.ExternalAgentConfigMigrationItem{
			ItemType:    api.MigrationAgentsMd,
			Description: "Migrate " + source + " to " + target,
			Cwd:         &repo,
		})
	}
	return res, nil
}

// ImportExternalAgent imports the items of externalAgentConfig/import
// (only AGENTS_MD ones, as detected) and returns their outcome, one
// result per item type asked for, in the order first asked. An item's cwd
// is looked at afresh, as detect does: its description is not trusted. A
// CLAUDE.md becomes the repository's AGENTS.md with the other agent's
// names rewritten to Codex's; an AGENTS.md with text is never replaced.
// progress is called after each item with that item's outcome.
func (s *Service) ImportExternalAgent(ctx context.Context, a fsguard.Access, items []api.ExternalAgentConfigMigrationItem,
	progress func(api.List[api.ExternalAgentConfigImportTypeResult])) api.List[api.ExternalAgentConfigImportTypeResult] {
	var out api.List[api.ExternalAgentConfigImportTypeResult]
	byType := map[api.ExternalAgentConfigMigrationItemType]int{}
	for _, it := range items {
		one := s.importItem(ctx, a, it)
		progress(api.List[api.ExternalAgentConfigImportTypeResult]{one})
		i, ok := byType[it.ItemType]
		if !ok {
			i = len(out)
			byType[it.ItemType] = i
			out = append(out, newTypeResult(it.ItemType))
		}
		out[i].Successes = append(out[i].Successes, one.Successes...)
		out[i].Failures = append(out[i].Failures, one.Failures...)
	}
	return out
}

func newTypeResult(t api.ExternalAgentConfigMigrationItemType) api.ExternalAgentConfigImportTypeResult {
	return api.ExternalAgentConfigImportTypeResult{ItemType: t,
		Successes: api.List[api.ExternalAgentConfigImportItemTypeSuccess]{}, Failures: api.List[api.ExternalAgentConfigImportItemTypeFailure]{}}
}

// importItem imports one item. Its successes and failures name the cwd
// the item gave.
func (s *Service) importItem(ctx context.Context, a fsguard.Access, it api.ExternalAgentConfigMigrationItem) api.ExternalAgentConfigImportTypeResult {
	r := newTypeResult(it.ItemType)
	failure := func(stage, msg string) {
		r.Failures = append(r.Failures, api.ExternalAgentConfigImportItemTypeFailure{ItemType: it.ItemType, Cwd: it.Cwd,
			FailureStage: stage, Message: msg})
	}
	if it.ItemType != api.MigrationAgentsMd {
		failure("import", "appserver does not import "+string(it.ItemType)+" items")
		return r
	}
	if it.Cwd == nil || *it.Cwd == "" {
		return r // the home's: nothing to import into
	}
	repo, ok := s.repoRoot(ctx, a, *it.Cwd)
	if !ok {
		return r
	}
	source, target, ok := s.agentsMdMigration(ctx, a, repo)
	if !ok {
		return r // nothing to import (any more)
	}
	if err := s.copyRewritten(ctx, a, source, target); err != nil {
		failure("import", err.Error())
		return r
	}
	r.Successes = append(r.Successes, api.ExternalAgentConfigImportItemTypeSuccess{ItemType: it.ItemType, Cwd: it.Cwd,
		Source: &source, Target: &target})
	return r
}

// repoRoot is the repository holding cwd, as the reference finds it: the
// nearest directory at or above cwd (its parent for a file) with a .git
// directory or file, else cwd; false when cwd is not absolute or cannot
// be read by a. The search stops where a may not read.
func (s *Service) repoRoot(ctx context.Context, a fsguard.Access, cwd string) (string, bool) {
	if !filepath.IsAbs(cwd) {
		return "", false
	}
	cwd = filepath.Clean(cwd)
	fi, err := s.guard.Stat(ctx, a, cwd)
	if err != nil {
		return "", false
	}
	if !fi.IsDir() {
		cwd = filepath.Dir(cwd)
	}
	for dir := cwd; ; dir = filepath.Dir(dir) {
		if _, err := s.guard.Stat(ctx, a, filepath.Join(dir, ".git")); err == nil {
			return dir, true
		}
		if _, err := s.guard.Stat(ctx, a, dir); err != nil || dir == filepath.Dir(dir) {
			return cwd, true
		}
	}
}

// agentsMdMigration is the CLAUDE.md of repo to migrate and the AGENTS.md
// it becomes; false when there is none, or AGENTS.md has text already.
func (s *Service) agentsMdMigration(ctx context.Context, a fsguard.Access, repo string) (source, target string, ok bool) {
	target = filepath.Join(repo, agentsMd)
	if text, exists := s.readText(ctx, a, target); exists && strings.TrimSpace(text) != "" {
		return "", "", false
	} else if !exists {
		if _, err := s.guard.Stat(ctx, a, target); err == nil {
			return "", "", false // something not a readable file
		}
	}
	for _, c := range []string{filepath.Join(repo, externalAgentMd), filepath.Join(repo, externalAgentDir, externalAgentMd)} {
		if text, ok := s.readText(ctx, a, c); ok && strings.TrimSpace(text) != "" {
			return c, target, true
		}
	}
	return "", "", false
}

// readText reads a regular file a may read, up to MaxFileBytes; false
// when it is not one.
func (s *Service) readText(ctx context.Context, a fsguard.Access, path string) (string, bool) {
	f, err := s.guard.OpenRead(ctx, a, path)
	if err != nil {
		return "", false
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, s.cfg.MaxFileBytes+1))
	if err != nil || int64(len(b)) > s.cfg.MaxFileBytes {
		return "", false
	}
	return string(b), true
}

// copyRewritten writes source's text to target with the other agent's
// names rewritten.
func (s *Service) copyRewritten(ctx context.Context, a fsguard.Access, source, target string) error {
	text, ok := s.readText(ctx, a, source)
	if !ok {
		return invalid("cannot read %s", source)
	}
	err := s.inTree(ctx, a, func(t *fsguard.Tree) error {
		tg, err := t.Resolve("/", target, fsguard.Write)
		if err != nil {
			return err
		}
		return t.WriteFile(tg.Real, []byte(rewriteAgentTerms(text)))
	})
	return fail(err)
}

// rewriteAgentTerms replaces, case-insensitively and as whole words, the
// other agent's file name with AGENTS.md and its names with Codex.
func rewriteAgentTerms(text string) string {
	text = replaceWord(text, "claude.md", agentsMd)
	for _, name := range []string{"claude code", "claude-code", "claude_code", "claudecode", "claude"} {
		text = replaceWord(text, name, "Codex")
	}
	return text
}

// replaceWord replaces each ASCII-case-insensitive occurrence of word
// (lower case) in s that no letter, digit or underscore touches.
func replaceWord(s, word, with string) string {
	lower := asciiLower(s)
	var b strings.Builder
	last := 0
	for from := 0; ; {
		i := strings.Index(lower[from:], word)
		if i < 0 {
			break
		}
		start, end := from+i, from+i+len(word)
		if start >= last && (start == 0 || !wordByte(s[start-1])) && (end == len(s) || !wordByte(s[end])) {
			b.WriteString(s[last:start])
			b.WriteString(with)
			last = end
		}
		from = start + 1
	}
	if last == 0 {
		return s
	}
	b.WriteString(s[last:])
	return b.String()
}

// asciiLower lowers ASCII letters only, so that byte offsets stay those
// of s.
func asciiLower(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

func wordByte(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z'
}

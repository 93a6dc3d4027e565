package server

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/audit"
	"github.com/appserver/appserver/internal/clientfs"
	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/principal"
)

// Limits of skills/extraRoots/set and skills/config/write.
const (
	// MaxSkillExtraRoots is how many extra roots one request may set.
	MaxSkillExtraRoots = 64
	// maxSkillRootBytes bounds one extra root's path.
	maxSkillRootBytes = 4096
)

// skillRoots holds, by principal name ("" for the operator), the extra
// skill roots each principal set (skills/extraRoots/set): they apply to
// its own skills/list only, and last as long as the daemon.
type skillRoots struct {
	mu    sync.Mutex
	extra map[string][]string
}

// markDisabled marks the skills of res that who's configuration turns
// off (skills/config/write).
func (s *Server) markDisabled(who principal.Principal, res api.SkillsListResult) {
	if s.cfg.SkillSwitches == nil {
		return
	}
	names, paths := s.cfg.SkillSwitches.DisabledSkills(who.Name())
	if len(names)+len(paths) == 0 {
		return
	}
	for _, e := range res.Data {
		for i, sk := range e.Skills {
			if slices.Contains(names, sk.Name) || slices.Contains(paths, filepath.Clean(sk.Path)) {
				e.Skills[i].Enabled = false
			}
		}
	}
}

func (r *skillRoots) get(who principal.Principal) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.extra[who.Name()])
}

func (r *skillRoots) set(who principal.Principal, roots []string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.extra == nil {
		r.extra = map[string][]string{}
	}
	if len(roots) == 0 {
		delete(r.extra, who.Name())
		return
	}
	r.extra[who.Name()] = roots
}

// skillsExtraRootsSet answers skills/extraRoots/set: every root must be a
// path the connection's principal may read (its workspace roots, never
// the daemon's files or a masked path); the list replaces the one it set
// before.
func (s *Server) skillsExtraRootsSet(_ context.Context, c *Call) (any, error) {
	var p api.SkillsExtraRootsSetParams
	if err := DecodeParams(c, &p, "extraRoots"); err != nil {
		return nil, err
	}
	if len(p.ExtraRoots) > MaxSkillExtraRoots {
		return nil, InvalidRequest("extraRoots has %d entries; at most %d are allowed", len(p.ExtraRoots), MaxSkillExtraRoots)
	}
	roots := make([]string, 0, len(p.ExtraRoots))
	for i, root := range p.ExtraRoots {
		res, err := s.checkSkillRoot(c.Session.who, fmt.Sprintf("extraRoots[%d]", i), string(root))
		if err != nil {
			return nil, err
		}
		if !slices.Contains(roots, res) {
			roots = append(roots, res)
		}
	}
	s.skillRoots.set(c.Session.who, roots)
	return api.SkillsExtraRootsSetResult{}, nil
}

// checkSkillRoot returns the absolute path root as who may search it for
// skills (symlinks resolved for a principal), or why not.
func (s *Server) checkSkillRoot(who principal.Principal, param, root string) (string, error) {
	switch {
	case strings.ContainsRune(root, 0):
		return "", InvalidRequest("%s contains a NUL byte", param)
	case len(root) > maxSkillRootBytes:
		return "", InvalidRequest("%s is %d bytes long; at most %d are allowed", param, len(root), maxSkillRootBytes)
	case !filepath.IsAbs(root):
		return "", InvalidRequest("Invalid request: AbsolutePathBuf deserialized without a base path")
	}
	res, err := who.CheckPath(param, root)
	if err != nil {
		return "", err
	}
	access, err := clientfs.AccessOf(who)
	if err != nil {
		return "", err
	}
	if s.cfg.Files != nil {
		if err := s.cfg.Files.CheckName(access, res, fsguard.Read); err != nil {
			return "", apperr.Wrap(apperr.Forbidden, err, "%s %q may not be searched for skills", param, root)
		}
	}
	return res, nil
}

// skillExtraRoots returns the extra roots who set that it may still
// search: each is checked again, since a symlink on the way may have been
// re-pointed since it was set.
func (s *Server) skillExtraRoots(who principal.Principal) []string {
	var out []string
	for i, root := range s.skillRoots.get(who) {
		if res, err := s.checkSkillRoot(who, fmt.Sprintf("extraRoots[%d]", i), root); err == nil {
			out = append(out, res)
		}
	}
	return out
}

// skillsConfigWrite answers skills/config/write: the skill named by
// exactly one of name and path is turned on or off in the user config of
// the connection's principal.
func (s *Server) skillsConfigWrite(ctx context.Context, c *Call) (any, error) {
	var p api.SkillsConfigWriteParams
	if err := DecodeParams(c, &p, "enabled"); err != nil {
		return nil, err
	}
	if (p.Name == nil) == (p.Path == nil) {
		return nil, InvalidParams("skills/config/write requires exactly one of path or name")
	}
	if s.cfg.SkillSwitches == nil {
		return nil, InvalidRequest("skill switches are not supported by this server")
	}
	var name, path string
	if p.Name != nil {
		if strings.ContainsRune(*p.Name, 0) {
			return nil, InvalidRequest("name contains a NUL byte")
		}
		if len(*p.Name) > maxSkillRootBytes {
			return nil, InvalidRequest("name is %d bytes long; at most %d are allowed", len(*p.Name), maxSkillRootBytes)
		}
		if strings.TrimSpace(*p.Name) == "" {
			return nil, InvalidParams("skills/config/write requires exactly one of path or name")
		}
		name = *p.Name
	} else {
		res, err := s.checkSkillRoot(c.Session.who, "path", string(*p.Path))
		if err != nil {
			return nil, err
		}
		path = res
	}
	on, err := s.cfg.SkillSwitches.SetSkillEnabled(ctx, c.Session.who.Name(), name, path, p.Enabled)
	key := "skills.config.name." + name
	if p.Path != nil {
		key = "skills.config.path." + path
	}
	s.cfg.Audit.Record(ctx, audit.Entry{Kind: audit.KindConfigWrite, Detail: configWriteDetail{
		Method: c.Method, Keys: []string{key}, Enabled: &p.Enabled, Error: errText(err),
	}})
	if err != nil {
		return nil, codedConfigError(err)
	}
	return api.SkillsConfigWriteResult{EffectiveEnabled: on}, nil
}

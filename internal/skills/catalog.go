package skills

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"unicode/utf8"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/registry"
)

// getenv is the default environment lookup.
var getenv = os.Getenv

// Config is the [skills] configuration: local roots ([skills] roots) and
// remote providers ([skills.remote.<id>] url, bearer_token_env). The toml
// tags match those keys.
type Config struct {
	// Roots are local skill roots. Absolute paths (and "~/..." ones) have
	// user scope; relative paths are resolved against the turn's directory
	// and have repo scope. When at least one root is configured, the
	// workspace roots (WorkspaceRootDirs) are searched as well.
	Roots []string `toml:"roots"`
	// Remote maps a provider id (the authority id the model sees) to its
	// endpoint.
	Remote map[string]RemoteConfig `toml:"remote"`
}

// Options holds the dependencies of a Catalog built by New.
type Options struct {
	// Logger receives provider failures; nil discards.
	Logger *slog.Logger
	// Local tunes the local provider.
	Local LocalOptions
	// Remote tunes every remote provider.
	Remote RemoteOptions
}

// Catalog is the set of configured skill providers: it backs the skills
// namespace tools for the model and the skills/list method for clients.
// Its cursors are signed with a per-process key. It is safe for concurrent
// use.
type Catalog struct {
	logger    *slog.Logger
	providers []Provider // local first, then by authority
	byAuth    map[Authority]Provider
	local     *LocalProvider
	codec     cursorCodec
}

// New builds the providers of cfg: a LocalProvider (which always searches
// the workspace's own skill folders, then Roots) and one RemoteProvider per
// Remote entry.
func New(cfg Config, opts Options) (*Catalog, error) {
	providers := []Provider{NewLocalProvider(cfg.Roots, opts.Local)}
	ids := make([]string, 0, len(cfg.Remote))
	for id := range cfg.Remote {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	for _, id := range ids {
		p, err := NewRemoteProvider(id, cfg.Remote[id], opts.Remote)
		if err != nil {
			return nil, err
		}
		providers = append(providers, p)
	}
	return NewCatalog(opts.Logger, providers...)
}

// Configured reports whether cfg names any skill source beyond the
// workspace defaults; only then are the skills tools offered to the model.
func (cfg Config) Configured() bool { return len(cfg.Roots) > 0 || len(cfg.Remote) > 0 }

// NewCatalog returns a catalog over the given providers (e.g. custom ones).
// Authorities must be valid and distinct.
func NewCatalog(logger *slog.Logger, providers ...Provider) (*Catalog, error) {
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Catalog{logger: logger, byAuth: map[Authority]Provider{}, codec: processCodec()}
	for _, p := range providers {
		if p == nil {
			return nil, apperr.New(apperr.Invalid, "skill provider is nil")
		}
		a := p.Authority()
		if (a.Kind != KindLocal && a.Kind != KindRemote) || !validHandle(a.ID, MaxAuthorityIDBytes) {
			return nil, apperr.New(apperr.Invalid, "skill provider authority %q is invalid", a.String())
		}
		if _, dup := c.byAuth[a]; dup {
			return nil, apperr.New(apperr.Conflict, "skill provider authority %q is configured twice", a.String())
		}
		c.byAuth[a] = p
		c.providers = append(c.providers, p)
		if lp, ok := p.(*LocalProvider); ok && c.local == nil {
			c.local = lp
		}
	}
	slices.SortStableFunc(c.providers, func(a, b Provider) int {
		x, y := a.Authority(), b.Authority()
		return cmp.Or(cmp.Compare(kindRank(x.Kind), kindRank(y.Kind)), cmp.Compare(x.ID, y.ID))
	})
	return c, nil
}

func kindRank(kind string) int {
	if kind == KindLocal {
		return 0
	}
	return 1
}

// HasProviders reports whether any provider is configured; the skills
// namespace is offered to the model only then.
func (c *Catalog) HasProviders() bool { return c != nil && len(c.providers) > 0 }

// Providers returns the providers in listing order.
func (c *Catalog) Providers() []Provider { return slices.Clone(c.providers) }

// Local returns the local provider, or nil when no root is configured.
func (c *Catalog) Local() *LocalProvider { return c.local }

// Close releases provider resources (idle HTTP connections).
func (c *Catalog) Close() {
	for _, p := range c.providers {
		if rp, ok := p.(*RemoteProvider); ok {
			rp.Close()
		}
	}
}

// SkillsList answers the skills/list method (docs/protocol.md §4.16): one entry
// per requested directory (defaultCwd when none is given) with the local
// skills available there and the SKILL.md files that failed to load.
// Remote skills are not part of it. extra are the roots the client added
// (skills/extraRoots/set), searched for every directory.
func (c *Catalog) SkillsList(ctx context.Context, params api.SkillsListParams, defaultCwd string, extra []string) (api.SkillsListResult, error) {
	cwds := params.Cwds
	if len(cwds) == 0 {
		cwds = []string{defaultCwd}
	}
	force := params.ForceReload != nil && *params.ForceReload
	res := api.SkillsListResult{Data: make(api.List[api.SkillsListEntry], 0, len(cwds))}
	for _, cwd := range cwds {
		e, err := c.ListCwd(ctx, Query{Cwd: cwd, ForceReload: force, ExtraRoots: extra})
		if err != nil {
			return api.SkillsListResult{}, err
		}
		res.Data = append(res.Data, e)
	}
	return res, nil
}

// ListCwd returns the local skills for one directory (q.Cwd) as the
// skills/list entry.
func (c *Catalog) ListCwd(ctx context.Context, q Query) (api.SkillsListEntry, error) {
	cwd := q.Cwd
	entry := api.SkillsListEntry{Cwd: cwd, Skills: api.List[api.SkillMetadata]{}, Errors: api.List[api.SkillErrorInfo]{}}
	if c.local == nil {
		return entry, nil
	}
	if cwd != "" && !filepath.IsAbs(cwd) {
		return api.SkillsListEntry{}, apperr.New(apperr.Invalid, "cwd must be an absolute path: %q", cwd)
	}
	l, err := c.local.List(ctx, q)
	if err != nil {
		return api.SkillsListEntry{}, err
	}
	for _, e := range l.Entries {
		m := api.SkillMetadata{Name: e.Name, Description: e.Description, Path: e.Path, Scope: e.Scope, Enabled: e.Enabled}
		if e.ShortDescription != "" {
			sd := e.ShortDescription
			m.ShortDescription = &sd
		}
		entry.Skills = append(entry.Skills, m)
	}
	entry.Errors = append(entry.Errors, l.Errors...)
	return entry, nil
}

// Limits of listed metadata (docs/tools.md §6.1), in bytes.
const (
	maxListedNameBytes        = 256
	maxListedDescriptionBytes = 512
	maxWarnings               = 4
	maxWarningBytes           = 256
)

// listable is the catalog as skills.list pages through it.
type listable struct {
	skills    []ListedSkill
	warnings  []string
	truncated bool
	stamp     uint64
}

// collect gathers the enabled entries of every provider (concurrently) into
// the bounded listing: invalid handles are skipped, long names and
// descriptions cut, at most MaxListedSkills kept and four warnings of at
// most 256 bytes; a provider failure becomes a warning.
func (c *Catalog) collect(ctx context.Context, q Query) listable {
	type result struct {
		l   Listing
		err error
	}
	results := make([]result, len(c.providers))
	var wg sync.WaitGroup
	for i, p := range c.providers {
		wg.Go(func() {
			l, err := p.List(ctx, q)
			results[i] = result{l, err}
		})
	}
	wg.Wait()
	var out listable
	var warnings []string
	for i, r := range results {
		auth := c.providers[i].Authority()
		if r.err != nil {
			c.logger.Warn("skill provider listing failed", slog.String("authority", auth.String()), slog.Any("error", r.err))
			warnings = append(warnings, fmt.Sprintf("skills from %s are unavailable: %s", auth.String(), apperrText(r.err)))
			continue
		}
		warnings = append(warnings, r.l.Warnings...)
		for _, e := range r.l.Entries {
			if !e.Enabled {
				continue
			}
			if len(out.skills) >= MaxListedSkills {
				out.truncated = true
				break
			}
			if !validHandle(e.Package, MaxResourceURIBytes) || !validHandle(e.MainResource, MaxResourceURIBytes) {
				out.truncated = true
				continue
			}
			if _, _, err := ValidateResourceInPackage(e.Package, e.MainResource); err != nil {
				out.truncated = true
				continue
			}
			name, cutName := truncateUTF8(oneLine(e.Name), maxListedNameBytes)
			desc, cutDesc := truncateUTF8(oneLine(e.Description), maxListedDescriptionBytes)
			out.truncated = out.truncated || cutName || cutDesc
			out.skills = append(out.skills, ListedSkill{Authority: auth, Package: e.Package, Name: name, Description: desc, MainResource: e.MainResource})
		}
	}
	if len(warnings) > maxWarnings {
		warnings = warnings[:maxWarnings]
		out.truncated = true
	}
	out.warnings = make([]string, len(warnings))
	for i, w := range warnings {
		var cut bool
		out.warnings[i], cut = truncateUTF8(oneLine(w), maxWarningBytes)
		out.truncated = out.truncated || cut
	}
	parts := make([]string, 0, 6*len(out.skills))
	for _, s := range out.skills {
		parts = append(parts, s.Authority.Kind, s.Authority.ID, s.Package, s.Name, s.Description, s.MainResource)
	}
	out.stamp = c.codec.hashStrings(parts...)
	return out
}

// apperrText is the text of a provider error shown to the model.
func apperrText(err error) string {
	var ae *apperr.Error
	if errors.As(err, &ae) {
		return ae.Message
	}
	return err.Error()
}

// List runs skills.list: one page of the live catalog for a turn in cwd.
// cursor is "" for the first page or a next_cursor from an earlier page.
func (c *Catalog) List(ctx context.Context, cwd, cursorText string) (ListResult, []byte, error) {
	var offset int
	var want *cursor
	if cursorText != "" {
		cur, err := c.codec.decode(cursorText, cursorList)
		if err != nil {
			return ListResult{}, nil, modelError(apperr.Invalid, "invalid skills.list cursor: pass next_cursor exactly as skills.list returned it, or omit cursor to start from the first page")
		}
		want = &cur
	}
	l := c.collect(ctx, Query{Cwd: cwd})
	if want != nil {
		if want.stamp != l.stamp {
			return ListResult{}, nil, modelError(apperr.Conflict, "skills.list cursor is stale: the skill catalog changed since it was issued; call skills.list without a cursor to start over")
		}
		if want.offset > uint64(len(l.skills)) {
			return ListResult{}, nil, modelError(apperr.Invalid, "skills.list cursor is out of range")
		}
		offset = int(want.offset)
	}
	return pageList(l.skills, offset, l.warnings, l.truncated, func(next int) string {
		return c.codec.encode(cursor{kind: cursorList, offset: uint64(next), stamp: l.stamp})
	})
}

// ReadRequest is a skills.read call.
type ReadRequest struct {
	// Cwd is the turn's working directory.
	Cwd string
	// Authority is the provider, as skills.list returned it; nil lets the
	// catalog pick the only provider that lists Package.
	Authority *Authority
	// Package is the package id from skills.list.
	Package string
	// Resource is the resource id to read.
	Resource string
	// Cursor is "" or a next_cursor from an earlier read of this resource.
	Cursor string
}

// Read runs skills.read: it validates the handles, revalidates the package
// against its provider's live catalog, routes the resource to that
// provider and returns the page at the cursor. Rejections are
// respond-to-model errors; a provider answering with another resource id
// is fatal (registry.ErrFatal).
func (c *Catalog) Read(ctx context.Context, req ReadRequest) (ReadResult, []byte, error) {
	if req.Authority != nil {
		if !validHandle(req.Authority.Kind, MaxAuthorityIDBytes) {
			return ReadResult{}, nil, handleError("authority.kind", MaxAuthorityIDBytes)
		}
		if !validHandle(req.Authority.ID, MaxAuthorityIDBytes) {
			return ReadResult{}, nil, handleError("authority.id", MaxAuthorityIDBytes)
		}
	}
	if !validHandle(req.Package, MaxResourceURIBytes) {
		return ReadResult{}, nil, handleError("package", MaxResourceURIBytes)
	}
	if !validHandle(req.Resource, MaxResourceURIBytes) {
		return ReadResult{}, nil, handleError("resource", MaxResourceURIBytes)
	}
	var cur *cursor
	if req.Cursor != "" {
		cc, err := c.codec.decode(req.Cursor, cursorRead)
		if err != nil {
			return ReadResult{}, nil, modelError(apperr.Invalid, "invalid skills.read cursor: pass next_cursor exactly as skills.read returned it, or omit cursor to read from the beginning")
		}
		cur = &cc
	}
	if _, _, err := ValidateResourceInPackage(req.Package, req.Resource); err != nil {
		return ReadResult{}, nil, modelError(apperr.Invalid, "%s", err.Error())
	}
	q := Query{Cwd: req.Cwd}
	p, err := c.provider(ctx, q, req.Authority, req.Package)
	if err != nil {
		return ReadResult{}, nil, err
	}
	auth := p.Authority()
	binding := c.codec.hashStrings(auth.Kind, auth.ID, req.Package, req.Resource)
	if cur != nil && cur.binding != binding {
		return ReadResult{}, nil, modelError(apperr.Invalid, "invalid skills.read cursor: it continues a different resource; omit cursor to read this one from the beginning")
	}

	// Revalidate against the live catalog, then route to the provider.
	e, err := p.Lookup(ctx, q, req.Package)
	if err != nil {
		if errors.Is(err, ErrPackageUnavailable) {
			return ReadResult{}, nil, modelError(apperr.NotFound, "%s", ErrPackageUnavailable.Error())
		}
		return ReadResult{}, nil, modelError(apperr.Unavailable, "skill provider %s failed to confirm the package: %s", auth.String(), apperrText(err))
	}
	if !e.Enabled || e.Package != req.Package {
		return ReadResult{}, nil, modelError(apperr.NotFound, "%s", ErrPackageUnavailable.Error())
	}
	res, err := p.Read(ctx, q, req.Package, req.Resource)
	if err != nil {
		var ue *URIError
		switch {
		case errors.Is(err, ErrPackageUnavailable):
			return ReadResult{}, nil, modelError(apperr.NotFound, "%s", ErrPackageUnavailable.Error())
		case errors.As(err, &ue):
			return ReadResult{}, nil, modelError(apperr.Invalid, "%s", ue.Error())
		}
		var ae *apperr.Error
		if errors.As(err, &ae) {
			return ReadResult{}, nil, modelError(ae.Code, "%s", ae.Message)
		}
		return ReadResult{}, nil, modelError(apperr.Unavailable, "skill provider %s failed to read the resource: %s", auth.String(), err.Error())
	}
	if res.ID != req.Resource {
		return ReadResult{}, nil, registry.Fatalf("skill provider returned a different resource")
	}
	if !utf8.ValidString(res.Text) {
		return ReadResult{}, nil, modelError(apperr.Invalid, "resource is not UTF-8 text")
	}
	stamp := c.codec.hashStrings(res.Text)
	offset := 0
	if cur != nil {
		if cur.stamp != stamp {
			return ReadResult{}, nil, modelError(apperr.Conflict, "skills.read cursor is stale: the resource changed since it was issued; read it again without a cursor")
		}
		if cur.offset > uint64(len(res.Text)) || (cur.offset < uint64(len(res.Text)) && !utf8.RuneStart(res.Text[cur.offset])) {
			return ReadResult{}, nil, modelError(apperr.Invalid, "skills.read cursor is out of range")
		}
		offset = int(cur.offset)
	}
	out, raw, err := pageRead(req.Resource, res.Text, offset, func(end int) string {
		return c.codec.encode(cursor{kind: cursorRead, offset: uint64(end), binding: binding, stamp: stamp})
	})
	if err != nil {
		return ReadResult{}, nil, modelError(apperr.Internal, "skills.read could not page the resource: %s", err.Error())
	}
	return out, raw, nil
}

// provider resolves the authority of a read. Without an authority the
// package must be listed by exactly one provider.
func (c *Catalog) provider(ctx context.Context, q Query, a *Authority, pkg string) (Provider, error) {
	if a != nil {
		if a.Kind != KindLocal && a.Kind != KindRemote {
			return nil, modelError(apperr.NotFound, "unknown skill authority kind %q; use the authority object returned by skills.list", truncateForMessage(a.Kind, 64))
		}
		p, ok := c.byAuth[*a]
		if !ok {
			return nil, modelError(apperr.NotFound, "unknown skill authority %s; use the authority object returned by skills.list", truncateForMessage(a.String(), 300))
		}
		return p, nil
	}
	var found []Provider
	for _, p := range c.providers {
		if _, err := p.Lookup(ctx, q, pkg); err == nil {
			found = append(found, p)
		}
	}
	switch len(found) {
	case 0:
		return nil, modelError(apperr.NotFound, "%s", ErrPackageUnavailable.Error())
	case 1:
		return found[0], nil
	}
	return nil, modelError(apperr.Invalid, "authority is required: several providers offer this package")
}

package skills

import (
	"context"

	"github.com/appserver/appserver/api"
)

// The authority kinds a Provider can have.
const (
	// KindLocal is the authority kind of the local provider (skill roots on
	// this machine).
	KindLocal = "local"
	// KindRemote is the authority kind of remote (MCP-style HTTP) providers.
	KindRemote = "remote"
)

// LocalAuthorityID is the id of the local provider's authority.
const LocalAuthorityID = "local"

// MaxAuthorityIDBytes bounds an authority id (docs/tools.md §6.1).
const MaxAuthorityIDBytes = 256

// Authority identifies the provider that owns a skill package. The model
// copies it from skills.list into skills.read; it is encoded as
// {"kind":"remote","id":"codex_apps"}.
type Authority struct {
	// Kind is KindLocal or KindRemote.
	Kind string `json:"kind"`
	// ID names the provider within its kind, e.g. a [skills.remote.<id>] key.
	ID string `json:"id"`
}

// String returns "kind:id", for messages and logs.
func (a Authority) String() string { return a.Kind + ":" + a.ID }

// Query is the context of a catalog request.
type Query struct {
	// Cwd is the turn's (or the client's) working directory; the local
	// provider adds the workspace skill roots found from it.
	Cwd string
	// ForceReload asks the provider to bypass any cache.
	ForceReload bool
	// ExtraRoots are absolute skill roots the client added
	// (skills/extraRoots/set), already checked against what it may reach;
	// the local provider searches them after its configured roots.
	ExtraRoots []string
}

// Entry is one skill of a provider's catalog. Package and MainResource are
// opaque provider-owned ids; both must be canonical skill:// URIs with the
// main resource inside the package.
type Entry struct {
	// Package identifies the skill within its authority.
	Package string
	// Name is the skill name shown to the model.
	Name string
	// Description says when to use the skill.
	Description string
	// ShortDescription is an optional one-liner ("" when unset).
	ShortDescription string
	// MainResource is the resource to read first (the SKILL.md).
	MainResource string
	// Enabled tells whether the skill is offered; disabled entries are
	// neither listed nor readable.
	Enabled bool
	// Path is where the skill lives, for clients: the SKILL.md path of a
	// local skill, the package URI of a remote one.
	Path string
	// Scope is the local root scope (repo, user, ...); "" for remote skills.
	Scope api.SkillScope
}

// Listing is a provider's catalog at one moment.
type Listing struct {
	// Entries are the skills, in the provider's order.
	Entries []Entry
	// Warnings are problems the model should know about (skipped
	// resources, incomplete discovery, malformed SKILL.md files).
	Warnings []string
	// Errors are skill files that failed to load, for skills/list clients.
	Errors []api.SkillErrorInfo
}

// Resource is the text of one skill resource.
type Resource struct {
	// ID is the resource id the provider served; it must equal the
	// requested one.
	ID string
	// Text is the resource contents; it must be valid UTF-8.
	Text string
}

// Provider is one skill authority: it lists a catalog of packages and reads
// their resources. Implementations must be safe for concurrent use and
// honour ctx.
type Provider interface {
	// Authority identifies the provider in tool calls.
	Authority() Authority
	// List returns the provider's live catalog. A failure is reported to
	// the model as a warning, with no skills from this provider. The
	// listing may be shared with other callers: it must not be modified.
	List(ctx context.Context, q Query) (Listing, error)
	// Lookup returns the live catalog entry of one package, or an error
	// wrapping ErrPackageUnavailable when the package is not (or no longer)
	// in the catalog. skills.read calls it on every read, before Read.
	Lookup(ctx context.Context, q Query, pkg string) (Entry, error)
	// Read returns one resource of a package that Lookup just confirmed.
	// The caller has already checked that resource is a canonical skill
	// URI inside pkg; the provider must never turn the id into anything
	// that escapes the package.
	Read(ctx context.Context, q Query, pkg, resource string) (Resource, error)
}

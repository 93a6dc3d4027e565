package skills

import (
	"context"
	"strings"
	"sync"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/registry"
)

// The skills namespace and its tools; the model calls them skills.list and
// skills.read.
const (
	// Namespace is the namespace spec name.
	Namespace = "skills"
	// ListTool is the name of the listing tool inside the namespace.
	ListTool = "list"
	// ReadTool is the name of the reading tool inside the namespace.
	ReadTool = "read"
)

// Tool descriptions sent to the model.
const (
	// ListDescription describes skills.list.
	ListDescription = "List enabled skills and the opaque authority, package, and main_resource handles required by skills.read. " +
		"Results are paged: when next_cursor is not null, pass it as cursor to get the next page."
	// ReadDescription describes skills.read.
	ReadDescription = "Read one bounded page of a resource from an enabled skill. Pass the exact authority and package returned by skills.list; " +
		"resource identifiers are opaque and are routed to that provider (start with main_resource). " +
		"Pass next_cursor as cursor to continue; the pieces concatenate to the whole resource."
)

// Spec returns the skills namespace spec: list({cursor?}) and
// read({authority, package, resource, cursor?}), both strict:false with
// additionalProperties:false.
// It is built once, its tools' JSON with it, and shared.
func Spec() registry.NamespaceSpec { return specOnce() }

var specOnce = sync.OnceValue(func() registry.NamespaceSpec {
	ns := buildSpec()
	ns.Cache = registry.NewSpecCache(ns.Tools)
	return ns
})

// buildSpec builds Spec's value.
func buildSpec() registry.NamespaceSpec {
	list := registry.Object(map[string]*registry.Schema{
		"cursor": registry.String("Opaque next_cursor from a previous skills.list result; omit for the first page."),
	}, nil, registry.AllowAdditional(false))
	authority := registry.Object(map[string]*registry.Schema{
		"kind": registry.String("Authority kind, exactly as returned by skills.list."),
		"id":   registry.String("Authority id, exactly as returned by skills.list."),
	}, []string{"kind", "id"}, registry.AllowAdditional(false))
	authority.Description = "The authority object returned by skills.list for the package."
	read := registry.Object(map[string]*registry.Schema{
		"authority": authority,
		"package":   registry.String("Package id returned by skills.list."),
		"resource":  registry.String("Resource id inside the package; start with the skill's main_resource."),
		"cursor":    registry.String("Opaque next_cursor from the previous skills.read of this resource; omit to read from the beginning."),
	}, []string{"authority", "package", "resource"}, registry.AllowAdditional(false))
	return registry.NamespaceSpec{
		Name: Namespace,
		Tools: []registry.FunctionSpec{
			{Name: ListTool, Description: ListDescription, Parameters: list},
			{Name: ReadTool, Description: ReadDescription, Parameters: read},
		},
	}
}

// Register adds the skills namespace to b, backed by cat, when cat has at
// least one provider; otherwise it registers nothing. The tools are
// read-only and parallel-capable.
func Register(b *registry.Builder, cat *Catalog) error {
	if !cat.HasProviders() {
		return nil
	}
	return b.Register(Spec(), NewHandler(cat), true)
}

// Handler runs skills.list and skills.read against a Catalog. It never
// mutates the user's environment.
type Handler struct {
	cat *Catalog
}

// NewHandler returns the namespace handler for cat.
func NewHandler(cat *Catalog) *Handler { return &Handler{cat: cat} }

// Kind returns registry.PayloadFunction.
func (*Handler) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating returns false: the tools only read skills.
func (*Handler) IsMutating(context.Context, registry.Invocation) bool { return false }

// ContainsExternalContext reports that the results of this handler are
// external context (the reference marks skills outputs with
// with_external_context): text from skill providers, which memory and
// summary logic must treat as untrusted. Failed calls carry no provider
// text but are conservatively covered by the same answer.
func (*Handler) ContainsExternalContext() bool { return true }

// ExternalContextReporter is implemented by handlers whose outputs are
// external context. The turns layer looks the handler up with
// registry.Registry.Handler and checks this interface after each call.
type ExternalContextReporter interface {
	// ContainsExternalContext reports whether the handler's outputs carry
	// text from outside the conversation.
	ContainsExternalContext() bool
}

// IsExternalContext reports whether a call to namespace.name returns
// external context: true for skills.list and skills.read.
func IsExternalContext(namespace, name string) bool {
	return namespace == Namespace && (name == ListTool || name == ReadTool)
}

var _ ExternalContextReporter = (*Handler)(nil)

// listArgs are the arguments of skills.list.
type listArgs struct {
	Cursor *string `json:"cursor"`
}

// readArgs are the arguments of skills.read. Authority is optional in the
// parser so the later package-only shape can be added.
type readArgs struct {
	Authority *Authority `json:"authority"`
	Package   string     `json:"package"`
	Resource  string     `json:"resource"`
	Cursor    *string    `json:"cursor"`
}

// Handle runs one call. Success outputs are the JSON results (at most
// PageBudgetBytes); failures are short model-readable texts.
func (h *Handler) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	out, err := h.handle(ctx, inv)
	return out, boundError(err)
}

func (h *Handler) handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	fp, ok := inv.Payload.(registry.FunctionPayload)
	if !ok {
		return registry.Output{}, registry.Fatalf("tool %s invoked with incompatible payload", inv.DisplayName())
	}
	args := fp.Arguments
	if strings.TrimSpace(args) == "" {
		args = "{}"
	}
	switch inv.Name {
	case ListTool:
		var a listArgs
		if err := registry.DecodeArgumentsStrict(args, &a); err != nil {
			return registry.Output{}, err
		}
		_, raw, err := h.cat.List(ctx, inv.Turn.Cwd, deref(a.Cursor))
		if err != nil {
			return registry.Output{}, err
		}
		return registry.TextOutput(string(raw), true), nil
	case ReadTool:
		var a readArgs
		if err := registry.DecodeArgumentsStrict(args, &a); err != nil {
			return registry.Output{}, err
		}
		_, raw, err := h.cat.Read(ctx, ReadRequest{
			Cwd:       inv.Turn.Cwd,
			Authority: a.Authority,
			Package:   a.Package,
			Resource:  a.Resource,
			Cursor:    deref(a.Cursor),
		})
		if err != nil {
			return registry.Output{}, err
		}
		return registry.TextOutput(string(raw), true), nil
	}
	return registry.Output{}, apperr.New(apperr.NotFound, "unsupported call: %s", inv.DisplayName())
}

func deref(s *string) string {
	if s == nil {
		return ""
	}
	return *s
}

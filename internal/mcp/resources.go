package mcp

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/config"
	"github.com/appserver/appserver/internal/registry"
)

// The resource tools (docs/tools.md §2.13).
const (
	ListResourcesName         = "list_mcp_resources"
	ListResourceTemplatesName = "list_mcp_resource_templates"
	ReadResourceName          = "read_mcp_resource"
)

// resourceSession is the live session of a server for a resource request,
// and the timeout to apply.
func (m *Manager) resourceSession(ctx context.Context, name string) (*conn, context.Context, context.CancelFunc, error) {
	s, ok := m.server(name)
	if !ok {
		return nil, nil, nil, apperr.New(apperr.NotFound, "unknown MCP server '%s'", name)
	}
	c, err := s.session()
	if err != nil {
		return nil, nil, nil, apperr.New(apperr.Unavailable, "%s", err.Error())
	}
	cctx, cancel := context.WithTimeout(ctx, seconds(s.cfg.ToolTimeoutSec, config.DefaultMCPToolTimeoutSec))
	return c, cctx, cancel, nil
}

// ListResources lists one page of a server's resources.
func (m *Manager) ListResources(ctx context.Context, server, cursor string) ([]json.RawMessage, string, error) {
	c, cctx, cancel, err := m.resourceSession(ctx, server)
	if err != nil {
		return nil, "", err
	}
	defer cancel()
	res, err := c.sess.ListResources(cctx, &mcpsdk.ListResourcesParams{Cursor: cursor})
	if err != nil {
		return nil, "", apperr.New(apperr.Unavailable, "resources/list failed: %v", err)
	}
	out, err := marshalAll(res.Resources)
	return out, res.NextCursor, err
}

// ListResourceTemplates lists one page of a server's resource templates.
func (m *Manager) ListResourceTemplates(ctx context.Context, server, cursor string) ([]json.RawMessage, string, error) {
	c, cctx, cancel, err := m.resourceSession(ctx, server)
	if err != nil {
		return nil, "", err
	}
	defer cancel()
	res, err := c.sess.ListResourceTemplates(cctx, &mcpsdk.ListResourceTemplatesParams{Cursor: cursor})
	if err != nil {
		return nil, "", apperr.New(apperr.Unavailable, "resources/templates/list failed: %v", err)
	}
	out, err := marshalAll(res.ResourceTemplates)
	return out, res.NextCursor, err
}

// ReadResource reads a resource of a server (its contents blocks).
func (m *Manager) ReadResource(ctx context.Context, server, uri string) ([]json.RawMessage, error) {
	c, cctx, cancel, err := m.resourceSession(ctx, server)
	if err != nil {
		return nil, err
	}
	defer cancel()
	res, err := c.sess.ReadResource(cctx, &mcpsdk.ReadResourceParams{URI: uri})
	if err != nil {
		return nil, apperr.New(apperr.Unavailable, "resources/read failed: %v", err)
	}
	return marshalAll(res.Contents)
}

func marshalAll[T any](xs []T) ([]json.RawMessage, error) {
	out := make([]json.RawMessage, 0, len(xs))
	for _, x := range xs {
		raw, err := json.Marshal(x)
		if err != nil {
			return nil, err
		}
		out = append(out, raw)
	}
	return out, nil
}

// withServer adds "server" to each listed object, as the resource tools
// show them.
func withServer(server string, objs []json.RawMessage) []json.RawMessage {
	out := make([]json.RawMessage, 0, len(objs))
	for _, o := range objs {
		var m map[string]json.RawMessage
		if json.Unmarshal(o, &m) != nil {
			continue
		}
		m["server"], _ = json.Marshal(server)
		raw, _ := json.Marshal(m)
		out = append(out, raw)
	}
	return out
}

// allPages lists every page of one server, refusing a repeated cursor.
func allPages(ctx context.Context, page func(ctx context.Context, cursor string) ([]json.RawMessage, string, error)) ([]json.RawMessage, error) {
	var all []json.RawMessage
	seen := map[string]bool{}
	cursor := ""
	for {
		objs, next, err := page(ctx, cursor)
		if err != nil {
			return nil, err
		}
		all = append(all, objs...)
		if next == "" {
			return all, nil
		}
		if seen[next] {
			return nil, fmt.Errorf("the server repeated cursor %q", next)
		}
		seen[next] = true
		cursor = next
	}
}

// resourceArgs are the arguments of the resource tools.
type resourceArgs struct {
	Server string `json:"server"`
	Cursor string `json:"cursor"`
	URI    string `json:"uri"`
}

// registerResourceTools adds the three resource tools (parallel-capable).
func (m *Manager) registerResourceTools(b *registry.Builder, t *Turn) error {
	server := registry.String("The MCP server to ask, by its configured name; every server when omitted.")
	cursor := registry.String("To read the next page: the cursor the previous call for the same server answered with.")
	specs := []registry.FunctionSpec{
		{
			Name: ListResourcesName,
			Description: "List the resources MCP servers offer: data such as files, database schemas or records of an application " +
				"that a server shares for you to read. When a resource holds what you need, read it rather than searching the web.",
			Parameters: registry.Object(map[string]*registry.Schema{"server": server, "cursor": cursor}, nil, registry.AllowAdditional(false)),
		},
		{
			Name:        ListResourceTemplatesName,
			Description: "List the resource templates MCP servers offer: resource URIs with parts you fill in to name one resource.",
			Parameters:  registry.Object(map[string]*registry.Schema{"server": server, "cursor": cursor}, nil, registry.AllowAdditional(false)),
		},
		{
			Name:        ReadResourceName,
			Description: "Read one resource of an MCP server, named by its server and its URI.",
			Parameters: registry.Object(map[string]*registry.Schema{
				"server": registry.String("The server's configured name, as the `server` field of list_mcp_resources gives it."),
				"uri":    registry.String("The resource's URI, one that list_mcp_resources listed."),
			}, []string{"server", "uri"}, registry.AllowAdditional(false)),
		},
	}
	h := &resourceHandler{m: m, turn: t}
	for _, spec := range specs {
		if err := b.Register(spec, h, true); err != nil {
			return err
		}
	}
	return nil
}

// resourceHandler serves the resource tools of one turn.
type resourceHandler struct {
	m    *Manager
	turn *Turn
}

// Kind is function.
func (*resourceHandler) Kind() registry.PayloadKind { return registry.PayloadFunction }

// IsMutating is false: resources are read.
func (*resourceHandler) IsMutating(context.Context, registry.Invocation) bool { return false }

// Handle runs one resource tool call, with its mcpToolCall item (server
// "codex" when the call names none, as the reference).
func (h *resourceHandler) Handle(ctx context.Context, inv registry.Invocation) (registry.Output, error) {
	p, ok := inv.Payload.(registry.FunctionPayload)
	if !ok {
		return registry.Output{}, fmt.Errorf("unsupported payload for %s", inv.Name)
	}
	var a resourceArgs
	rawArgs := json.RawMessage(strings.TrimSpace(p.Arguments))
	if len(rawArgs) > 0 {
		if err := json.Unmarshal(rawArgs, &a); err != nil {
			return registry.Output{}, fmt.Errorf("failed to parse function arguments: %v", err)
		}
	}
	a.Server, a.Cursor, a.URI = strings.TrimSpace(a.Server), strings.TrimSpace(a.Cursor), strings.TrimSpace(a.URI)
	itemServer := a.Server
	if itemServer == "" {
		itemServer = "codex"
	}
	finish := h.m.startItem(ctx, h.turn, inv.CallID, itemServer, inv.Name, rawArgs, nil)
	text, err := h.run(ctx, inv.Name, a)
	if err != nil {
		finish(nil, err)
		return registry.Output{}, err
	}
	block, _ := json.Marshal(map[string]string{"type": "text", "text": text})
	finish(&api.McpServerToolCallResult{Content: api.List[json.RawMessage]{block}}, nil)
	return registry.TextOutput(text, true), nil
}

// run answers one resource tool call as JSON text.
func (h *resourceHandler) run(ctx context.Context, tool string, a resourceArgs) (string, error) {
	m := h.m
	if a.Server != "" && h.turn.Disabled[a.Server] {
		// The thread turned it off: for this thread it does not exist.
		return "", fmt.Errorf("MCP server '%s' is disabled for this thread", a.Server)
	}
	if tool == ReadResourceName {
		if a.Server == "" || a.URI == "" {
			return "", errors.New("read_mcp_resource requires server and uri")
		}
		contents, err := m.ReadResource(ctx, a.Server, a.URI)
		if err != nil {
			return "", err
		}
		return jsonText(map[string]any{"server": a.Server, "uri": a.URI, "contents": contents})
	}
	key, page := "resources", m.ListResources
	if tool == ListResourceTemplatesName {
		key, page = "resourceTemplates", m.ListResourceTemplates
	}
	if a.Server != "" {
		objs, next, err := page(ctx, a.Server, a.Cursor)
		if err != nil {
			return "", err
		}
		out := map[string]any{"server": a.Server, key: withServer(a.Server, objs)}
		if next != "" {
			out["nextCursor"] = next
		}
		return jsonText(out)
	}
	if a.Cursor != "" {
		return "", errors.New("a cursor needs the server whose listing it continues")
	}
	all := []json.RawMessage{}
	for _, s := range m.list() {
		if st, _, _, c := s.snapshot(); st == StateDisabled || c == nil || h.turn.Disabled[s.name] {
			continue
		}
		objs, err := allPages(ctx, func(ctx context.Context, cursor string) ([]json.RawMessage, string, error) {
			return page(ctx, s.name, cursor)
		})
		if err != nil {
			m.log.Info("MCP resource listing skipped a server", "server", s.name, "err", err)
			continue
		}
		all = append(all, withServer(s.name, objs)...)
	}
	return jsonText(map[string]any{key: all})
}

func jsonText(v any) (string, error) {
	b, err := json.Marshal(v)
	return string(b), err
}

package skills

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/appserver/appserver/internal/apperr"
)

// RemoteConfig configures one remote skill provider ([skills.remote.<id>]).
type RemoteConfig struct {
	// URL is the provider's MCP endpoint (Streamable HTTP), http or https.
	URL string `toml:"url"`
	// BearerTokenEnv names the environment variable holding the bearer
	// token sent as "Authorization: Bearer <token>"; "" sends none.
	BearerTokenEnv string `toml:"bearer_token_env"`
}

// Remote discovery and read limits (docs/tools.md §6.1).
const (
	// SkillMIMEType marks the resources/list entries that are skills.
	SkillMIMEType = "mcp/skill"
	// DefaultRemoteDiscoveryTimeout bounds one catalog discovery.
	DefaultRemoteDiscoveryTimeout = 10 * time.Second
	// DefaultRemoteReadTimeout bounds one resources/read.
	DefaultRemoteReadTimeout = 10 * time.Second

	maxResourcePages         = 10
	maxRemoteSkills          = 100
	maxRemoteNameChars       = 64
	maxQualifiedNameChars    = 128
	maxRemoteDescChars       = 1024
	maxRemoteResourceBytes   = 1 << 20
	maxRPCResponseBytes      = 16 << 20
	mcpProtocolVersion       = "2025-06-18"
	mcpSessionHeader         = "Mcp-Session-Id"
	mcpProtocolVersionHeader = "MCP-Protocol-Version"
)

// remoteIDPattern is what a remote provider id may look like (the MCP server
// name rule).
var remoteIDPattern = regexp.MustCompile(`^[A-Za-z0-9_-]+$`)

// RemoteOptions holds the dependencies of a RemoteProvider; zero values take
// the defaults.
type RemoteOptions struct {
	// HTTPClient sends the requests; nil uses a private client that Close
	// releases.
	HTTPClient *http.Client
	// Getenv reads the bearer token variable; nil uses os.Getenv.
	Getenv func(string) string
	// DiscoveryTimeout bounds List; 0 means DefaultRemoteDiscoveryTimeout.
	DiscoveryTimeout time.Duration
	// ReadTimeout bounds Read; 0 means DefaultRemoteReadTimeout.
	ReadTimeout time.Duration
	// ClientVersion is sent in the MCP initialize request.
	ClientVersion string
}

// RemoteProvider is a remote skill authority {"kind":"remote","id":<id>}: it
// discovers skills with MCP resources/list (resources of MIME type
// mcp/skill, at most 10 pages and 100 skills within the discovery timeout)
// and reads them with resources/read, over MCP Streamable HTTP (JSON or
// SSE responses, session ids, bearer auth).
//
// A skill's package is its resource URI (a canonical skill:// URI); its
// name is _meta.skill_name, qualified as <_meta.plugin_name>:<skill_name>
// unless _meta.source is "user"; its main resource is <package>/SKILL.md.
type RemoteProvider struct {
	id       string
	endpoint string
	tokenEnv string
	opts     RemoteOptions
	client   *http.Client
	owned    bool

	nextID atomic.Int64

	initMu  sync.Mutex // serializes session setup; taken before mu
	mu      sync.Mutex // guards session and version
	session string
	version string // negotiated protocol version; "" until initialized
}

// NewRemoteProvider validates cfg and returns the provider for id.
func NewRemoteProvider(id string, cfg RemoteConfig, opts RemoteOptions) (*RemoteProvider, error) {
	if !remoteIDPattern.MatchString(id) || len(id) > MaxAuthorityIDBytes {
		return nil, apperr.New(apperr.Invalid, "skills.remote.%s: the id must match ^[A-Za-z0-9_-]+$ and be at most %d bytes", id, MaxAuthorityIDBytes)
	}
	u, err := url.Parse(cfg.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, apperr.New(apperr.Invalid, "skills.remote.%s: url must be an http(s) URL", id)
	}
	if opts.Getenv == nil {
		opts.Getenv = getenv
	}
	if opts.DiscoveryTimeout <= 0 {
		opts.DiscoveryTimeout = DefaultRemoteDiscoveryTimeout
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultRemoteReadTimeout
	}
	if opts.ClientVersion == "" {
		opts.ClientVersion = "0"
	}
	p := &RemoteProvider{id: id, endpoint: cfg.URL, tokenEnv: cfg.BearerTokenEnv, opts: opts, client: opts.HTTPClient}
	if p.client == nil {
		p.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		p.owned = true
	}
	return p, nil
}

// Authority returns {"kind":"remote","id":<id>}.
func (p *RemoteProvider) Authority() Authority { return Authority{Kind: KindRemote, ID: p.id} }

// Close releases idle connections of the provider's own HTTP client.
func (p *RemoteProvider) Close() {
	if p.owned {
		p.client.CloseIdleConnections()
	}
}

// List discovers the remote catalog. A failing first page is an error;
// later failures, repeated cursors, the page and skill caps and malformed
// resources become warnings.
func (p *RemoteProvider) List(ctx context.Context, _ Query) (Listing, error) {
	ctx, cancel := context.WithTimeout(ctx, p.opts.DiscoveryTimeout)
	defer cancel()
	var l Listing
	var cursor string
	seenCursors := map[string]bool{}
	seenPackages := map[string]bool{}
	skills, skipped := 0, 0
	for page := 0; page < maxResourcePages; page++ {
		var res struct {
			Resources  []mcpResource `json:"resources"`
			NextCursor string        `json:"nextCursor"`
		}
		params := map[string]any{}
		if cursor != "" {
			params["cursor"] = cursor
		}
		if err := p.call(ctx, "resources/list", params, &res); err != nil {
			if page == 0 {
				return Listing{}, fmt.Errorf("remote skill discovery failed: %w", err)
			}
			l.Warnings = append(l.Warnings, fmt.Sprintf("remote skill discovery stopped after %d resource pages: %v", page, err))
			break
		}
		capped := false
		for _, r := range res.Resources {
			if r.MimeType != SkillMIMEType {
				continue
			}
			if skills == maxRemoteSkills {
				capped = true
				break
			}
			skills++
			e, ok := entryFromResource(r)
			if !ok || seenPackages[e.Package] {
				skipped++
				continue
			}
			seenPackages[e.Package] = true
			l.Entries = append(l.Entries, e)
		}
		if capped {
			l.Warnings = append(l.Warnings, fmt.Sprintf("remote skill discovery stopped at %d skills", maxRemoteSkills))
			break
		}
		if res.NextCursor == "" {
			break
		}
		if seenCursors[res.NextCursor] {
			l.Warnings = append(l.Warnings, "remote skill discovery stopped: the provider repeated a resources/list cursor")
			break
		}
		seenCursors[res.NextCursor] = true
		cursor = res.NextCursor
		if page+1 == maxResourcePages {
			l.Warnings = append(l.Warnings, fmt.Sprintf("remote skill discovery stopped after %d resource pages", maxResourcePages))
		}
	}
	if skipped > 0 {
		l.Warnings = append(l.Warnings, fmt.Sprintf("skipped %d malformed remote skill resources", skipped))
	}
	return l, nil
}

// Lookup discovers the live catalog again and returns pkg's enabled entry.
func (p *RemoteProvider) Lookup(ctx context.Context, q Query, pkg string) (Entry, error) {
	l, err := p.List(ctx, q)
	if err != nil {
		return Entry{}, err
	}
	for _, e := range l.Entries {
		if e.Package == pkg && e.Enabled {
			return e, nil
		}
	}
	return Entry{}, ErrPackageUnavailable
}

// Read fetches one resource with resources/read and returns the text
// content whose uri equals the requested resource.
func (p *RemoteProvider) Read(ctx context.Context, _ Query, pkg, resource string) (Resource, error) {
	if _, _, err := ValidateResourceInPackage(pkg, resource); err != nil {
		return Resource{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, p.opts.ReadTimeout)
	defer cancel()
	var res struct {
		Contents []struct {
			URI  string  `json:"uri"`
			Text *string `json:"text"`
		} `json:"contents"`
	}
	if err := p.call(ctx, "resources/read", map[string]any{"uri": resource}, &res); err != nil {
		return Resource{}, err
	}
	for _, c := range res.Contents {
		if c.URI != resource || c.Text == nil {
			continue
		}
		if len(*c.Text) > maxRemoteResourceBytes {
			return Resource{}, fmt.Errorf("resource exceeds the %d-byte read limit", maxRemoteResourceBytes)
		}
		return Resource{ID: c.URI, Text: *c.Text}, nil
	}
	return Resource{}, errors.New("the provider did not return matching text contents")
}

// mcpResource is one entry of an MCP resources/list result.
type mcpResource struct {
	URI         string         `json:"uri"`
	Name        string         `json:"name"`
	Description string         `json:"description"`
	MimeType    string         `json:"mimeType"`
	Meta        map[string]any `json:"_meta"`
}

// entryFromResource maps an mcp/skill resource to a catalog entry, or
// reports it malformed.
func entryFromResource(r mcpResource) (Entry, bool) {
	pkg, err := ParsePackageURI(r.URI)
	if err != nil || r.Meta == nil {
		return Entry{}, false
	}
	str := func(key string) (string, bool) {
		s, ok := r.Meta[key].(string)
		return s, ok
	}
	raw, ok := str("skill_name")
	if !ok {
		return Entry{}, false
	}
	name, ok := normalizedLabel(raw, maxRemoteNameChars)
	if !ok {
		return Entry{}, false
	}
	if src, _ := str("source"); src != "user" {
		rawPlugin, ok := str("plugin_name")
		if !ok {
			return Entry{}, false
		}
		plugin, ok := normalizedLabel(rawPlugin, maxRemoteNameChars)
		if !ok {
			return Entry{}, false
		}
		name = plugin + ":" + name
		if utf8.RuneCountInString(name) > maxQualifiedNameChars {
			return Entry{}, false
		}
	}
	desc, ok := normalizedDescription(r.Description)
	if !ok {
		return Entry{}, false
	}
	uri := pkg.String()
	return Entry{
		Package:      uri,
		Name:         name,
		Description:  desc,
		MainResource: uri + "/" + SkillFileName,
		Enabled:      true,
		Path:         uri,
	}, true
}

// normalizedLabel collapses whitespace; control characters, '&', '<', '>',
// an empty result or more than maxChars characters make it malformed.
func normalizedLabel(s string, maxChars int) (string, bool) {
	for _, r := range s {
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return "", false
		}
	}
	s = oneLine(s)
	if s == "" || utf8.RuneCountInString(s) > maxChars || strings.ContainsAny(s, "&<>") {
		return "", false
	}
	return s, true
}

// normalizedDescription collapses whitespace, HTML-escapes '&', '<' and
// '>' and cuts to maxRemoteDescChars characters (ending in "..."); control
// characters make it malformed.
func normalizedDescription(s string) (string, bool) {
	for _, r := range s {
		if unicode.IsControl(r) && !unicode.IsSpace(r) {
			return "", false
		}
	}
	var b strings.Builder
	count := 0
	for _, r := range oneLine(s) {
		piece := string(r)
		switch r {
		case '&':
			piece = "&amp;"
		case '<':
			piece = "&lt;"
		case '>':
			piece = "&gt;"
		}
		n := utf8.RuneCountInString(piece)
		if count+n > maxRemoteDescChars-3 {
			b.WriteString("...")
			break
		}
		b.WriteString(piece)
		count += n
	}
	return b.String(), true
}

// errSessionExpired is an HTTP 404 answer to a request carrying a session id.
var errSessionExpired = errors.New("MCP session expired")

// rpcError is a JSON-RPC error answered by the provider.
type rpcError struct {
	Code    int    `json:"code"`
	Message string `json:"message"`
}

// Error returns "MCP error <code>: <message>".
func (e *rpcError) Error() string {
	return fmt.Sprintf("MCP error %d: %s", e.Code, truncateForMessage(e.Message, 256))
}

// call runs one MCP request, setting up the session first and once more if
// the provider expired it.
func (p *RemoteProvider) call(ctx context.Context, method string, params, result any) error {
	for attempt := 0; ; attempt++ {
		if err := p.ensureSession(ctx); err != nil {
			return err
		}
		p.mu.Lock()
		session, version := p.session, p.version
		p.mu.Unlock()
		err := p.request(ctx, method, params, result, session, version)
		if errors.Is(err, errSessionExpired) && attempt == 0 {
			p.mu.Lock()
			if p.session == session {
				p.session, p.version = "", ""
			}
			p.mu.Unlock()
			continue
		}
		return err
	}
}

// ensureSession performs the MCP initialize handshake once per session.
func (p *RemoteProvider) ensureSession(ctx context.Context) error {
	p.initMu.Lock()
	defer p.initMu.Unlock()
	p.mu.Lock()
	ready := p.version != ""
	p.mu.Unlock()
	if ready {
		return nil
	}
	var res struct {
		ProtocolVersion string `json:"protocolVersion"`
	}
	params := map[string]any{
		"protocolVersion": mcpProtocolVersion,
		"capabilities":    map[string]any{},
		"clientInfo":      map[string]any{"name": "appserver", "version": p.opts.ClientVersion},
	}
	session, err := p.post(ctx, "initialize", params, &res, "", "", true)
	if err != nil {
		return fmt.Errorf("MCP initialize failed: %w", err)
	}
	version := res.ProtocolVersion
	if version == "" {
		version = mcpProtocolVersion
	}
	if _, err := p.post(ctx, "notifications/initialized", nil, nil, session, version, false); err != nil {
		return fmt.Errorf("MCP initialize failed: %w", err)
	}
	p.mu.Lock()
	p.session, p.version = session, version
	p.mu.Unlock()
	return nil
}

func (p *RemoteProvider) request(ctx context.Context, method string, params, result any, session, version string) error {
	_, err := p.post(ctx, method, params, result, session, version, true)
	return err
}

// post sends one JSON-RPC message. For a request (wantReply) it decodes the
// matching response from a JSON or an SSE body into result and returns the
// session id the provider assigned, if any.
func (p *RemoteProvider) post(ctx context.Context, method string, params, result any, session, version string, wantReply bool) (string, error) {
	msg := map[string]any{"jsonrpc": "2.0", "method": method}
	if params != nil {
		msg["params"] = params
	}
	id := p.nextID.Add(1)
	if wantReply {
		msg["id"] = id
	}
	body, err := json.Marshal(msg)
	if err != nil {
		return "", err
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.endpoint, bytes.NewReader(body))
	if err != nil {
		return "", err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json, text/event-stream")
	if session != "" {
		req.Header.Set(mcpSessionHeader, session)
	}
	if version != "" {
		req.Header.Set(mcpProtocolVersionHeader, version)
	}
	if p.tokenEnv != "" {
		token := p.opts.Getenv(p.tokenEnv)
		if token == "" {
			return "", fmt.Errorf("the bearer token variable %s is not set", p.tokenEnv)
		}
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := p.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return "", fmt.Errorf("request timed out or was cancelled: %w", ctx.Err())
		}
		return "", errors.New("the provider is unreachable")
	}
	defer resp.Body.Close()
	newSession := resp.Header.Get(mcpSessionHeader)
	switch {
	case resp.StatusCode == http.StatusNotFound && session != "":
		return "", errSessionExpired
	case resp.StatusCode == http.StatusUnauthorized || resp.StatusCode == http.StatusForbidden:
		return "", fmt.Errorf("authentication failed (HTTP %d)", resp.StatusCode)
	case resp.StatusCode < 200 || resp.StatusCode > 299:
		return "", fmt.Errorf("the provider answered HTTP %d", resp.StatusCode)
	case !wantReply:
		return newSession, nil
	}
	reader := io.LimitReader(resp.Body, maxRPCResponseBytes)
	mediaType, _, _ := mime.ParseMediaType(resp.Header.Get("Content-Type"))
	var raw []byte
	if mediaType == "text/event-stream" {
		raw, err = readSSEResponse(reader, id)
	} else {
		raw, err = io.ReadAll(reader)
	}
	if err != nil {
		return "", err
	}
	var rpc struct {
		ID     json.RawMessage `json:"id"`
		Result json.RawMessage `json:"result"`
		Error  *rpcError       `json:"error"`
	}
	if err := json.Unmarshal(raw, &rpc); err != nil {
		return "", errors.New("the provider sent an invalid JSON-RPC response")
	}
	if string(rpc.ID) != strconv.FormatInt(id, 10) {
		return "", errors.New("the provider answered another request id")
	}
	if rpc.Error != nil {
		return "", rpc.Error
	}
	if result != nil {
		if err := json.Unmarshal(rpc.Result, result); err != nil {
			return "", fmt.Errorf("the provider sent an invalid %s result", method)
		}
	}
	return newSession, nil
}

// readSSEResponse reads server-sent events until the JSON-RPC response with
// the given id; other messages (notifications, server requests) are skipped.
func readSSEResponse(r io.Reader, id int64) ([]byte, error) {
	br := bufio.NewReader(r)
	want := strconv.FormatInt(id, 10)
	var data bytes.Buffer
	dispatch := func() ([]byte, bool) {
		defer data.Reset()
		if data.Len() == 0 {
			return nil, false
		}
		var probe struct {
			ID     json.RawMessage `json:"id"`
			Method string          `json:"method"`
		}
		if json.Unmarshal(data.Bytes(), &probe) != nil || probe.Method != "" || string(probe.ID) != want {
			return nil, false
		}
		return bytes.Clone(data.Bytes()), true
	}
	for {
		line, err := br.ReadString('\n')
		trimmed := strings.TrimRight(line, "\r\n")
		switch {
		case trimmed == "" && line != "":
			if msg, ok := dispatch(); ok {
				return msg, nil
			}
		case strings.HasPrefix(trimmed, "data:"):
			if data.Len() > 0 {
				data.WriteByte('\n')
			}
			data.WriteString(strings.TrimPrefix(strings.TrimPrefix(trimmed, "data:"), " "))
		}
		if err != nil {
			if msg, ok := dispatch(); ok {
				return msg, nil
			}
			return nil, errors.New("the provider's event stream ended without a response")
		}
	}
}

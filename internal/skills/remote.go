package skills

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"sync"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/modelcontextprotocol/go-sdk/jsonrpc"
	mcpsdk "github.com/modelcontextprotocol/go-sdk/mcp"

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

	maxResourcePages       = 10
	maxRemoteSkills        = 100
	maxRemoteNameChars     = 64
	maxQualifiedNameChars  = 128
	maxRemoteDescChars     = 1024
	maxRemoteResourceBytes = 1 << 20
	maxRPCResponseBytes    = 16 << 20
	// mcpProtocolVersion is the MCP revision asked for: the newest one
	// with the initialize handshake (the SDK negotiates down).
	mcpProtocolVersion = "2025-11-25"
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
// and reads them with resources/read, over MCP Streamable HTTP through the
// official Go SDK's client (the one internal/mcp uses for MCP servers): one
// session, set up on first use and again when the provider expires it, with
// the bearer token added to every request.
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

	mcp *mcpsdk.Client

	mu   sync.Mutex // guards sess; held while a session is set up
	sess *mcpsdk.ClientSession
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
	p := &RemoteProvider{id: id, endpoint: cfg.URL, tokenEnv: cfg.BearerTokenEnv, opts: opts, client: opts.HTTPClient,
		mcp: mcpsdk.NewClient(&mcpsdk.Implementation{Name: "appserver", Version: opts.ClientVersion}, nil)}
	if p.client == nil {
		p.client = &http.Client{Transport: http.DefaultTransport.(*http.Transport).Clone()}
		p.owned = true
	}
	return p, nil
}

// Authority returns {"kind":"remote","id":<id>}.
func (p *RemoteProvider) Authority() Authority { return Authority{Kind: KindRemote, ID: p.id} }

// Close ends the MCP session and releases idle connections of the
// provider's own HTTP client.
func (p *RemoteProvider) Close() {
	p.mu.Lock()
	sess := p.sess
	p.sess = nil
	p.mu.Unlock()
	if sess != nil {
		_ = sess.Close()
	}
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
		var res *mcpsdk.ListResourcesResult
		err := p.call(ctx, func(s *mcpsdk.ClientSession) (err error) {
			res, err = s.ListResources(ctx, &mcpsdk.ListResourcesParams{Cursor: cursor})
			return err
		})
		if err != nil {
			if page == 0 {
				return Listing{}, fmt.Errorf("remote skill discovery failed: %w", err)
			}
			l.Warnings = append(l.Warnings, fmt.Sprintf("remote skill discovery stopped after %d resource pages: %v", page, err))
			break
		}
		capped := false
		for _, r := range res.Resources {
			if r == nil || r.MIMEType != SkillMIMEType {
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
	var res *mcpsdk.ReadResourceResult
	err := p.call(ctx, func(s *mcpsdk.ClientSession) (err error) {
		res, err = s.ReadResource(ctx, &mcpsdk.ReadResourceParams{URI: resource})
		return err
	})
	if err != nil {
		return Resource{}, err
	}
	for _, c := range res.Contents {
		if c == nil || c.URI != resource || c.Blob != nil {
			continue
		}
		if len(c.Text) > maxRemoteResourceBytes {
			return Resource{}, fmt.Errorf("resource exceeds the %d-byte read limit", maxRemoteResourceBytes)
		}
		return Resource{ID: c.URI, Text: c.Text}, nil
	}
	return Resource{}, errors.New("the provider did not return matching text contents")
}

// entryFromResource maps an mcp/skill resource to a catalog entry, or
// reports it malformed.
func entryFromResource(r *mcpsdk.Resource) (Entry, bool) {
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

// providerTransport adds the bearer token to every request of the SDK's
// streamable HTTP client and turns the HTTP failures a provider answers
// with into errors that say what failed. A 404 to a request with a session
// id is left to the SDK, which reports the session as gone.
type providerTransport struct {
	base  http.RoundTripper
	token string
}

// statusError is a provider's non-2xx HTTP answer.
type statusError struct{ code int }

// Error says what the status means for the caller.
func (e *statusError) Error() string {
	if e.code == http.StatusUnauthorized || e.code == http.StatusForbidden {
		return fmt.Sprintf("authentication failed (HTTP %d)", e.code)
	}
	return fmt.Sprintf("the provider answered HTTP %d", e.code)
}

// errUnreachable is a request that got no HTTP answer.
var errUnreachable = errors.New("the provider is unreachable")

// RoundTrip implements http.RoundTripper.
func (t *providerTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if t.token != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+t.token)
	}
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		if req.Context().Err() != nil {
			return nil, err
		}
		return nil, errUnreachable
	}
	if resp.StatusCode >= 200 && resp.StatusCode <= 299 ||
		resp.StatusCode == http.StatusNotFound && req.Header.Get("Mcp-Session-Id") != "" {
		return resp, nil
	}
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 4<<10))
	resp.Body.Close()
	return nil, &statusError{code: resp.StatusCode}
}

// session returns the provider's MCP session, set up on first use (the
// initialize handshake) and again after it was dropped.
func (p *RemoteProvider) session(ctx context.Context) (*mcpsdk.ClientSession, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.sess != nil {
		return p.sess, nil
	}
	var token string
	if p.tokenEnv != "" {
		if token = p.opts.Getenv(p.tokenEnv); token == "" {
			return nil, fmt.Errorf("the bearer token variable %s is not set", p.tokenEnv)
		}
	}
	hc := *p.client
	base := hc.Transport
	if base == nil {
		base = http.DefaultTransport
	}
	hc.Transport = &providerTransport{base: base, token: token}
	sess, err := p.mcp.Connect(ctx, &mcpsdk.StreamableClientTransport{
		Endpoint: p.endpoint, HTTPClient: &hc,
		// Discovery and reads are request and answer; a provider need not
		// hold a stream open for us, and no call is retried behind the
		// caller's timeout.
		DisableStandaloneSSE: true, MaxRetries: -1, MaxEventSize: maxRPCResponseBytes,
	}, &mcpsdk.ClientSessionOptions{ProtocolVersion: mcpProtocolVersion})
	if err != nil {
		return nil, fmt.Errorf("MCP initialize failed: %w", describe(ctx, err))
	}
	p.sess = sess
	return sess, nil
}

// drop forgets sess (if it is still the provider's) and closes it, so that
// the next call sets up a new one.
func (p *RemoteProvider) drop(sess *mcpsdk.ClientSession) {
	p.mu.Lock()
	if p.sess == sess {
		p.sess = nil
	}
	p.mu.Unlock()
	_ = sess.Close()
}

// call runs one MCP request on the session, setting up a new session once
// if the provider expired the old one. A session whose request failed
// other than by the provider's JSON-RPC answer is dropped.
func (p *RemoteProvider) call(ctx context.Context, do func(*mcpsdk.ClientSession) error) error {
	for attempt := 0; ; attempt++ {
		sess, err := p.session(ctx)
		if err != nil {
			return err
		}
		err = do(sess)
		if err == nil {
			return nil
		}
		var wire *jsonrpc.Error
		if !errors.As(err, &wire) {
			p.drop(sess)
			if errors.Is(err, mcpsdk.ErrSessionMissing) && attempt == 0 {
				continue
			}
		}
		return describe(ctx, err)
	}
}

// describe is the text of a failed request: the provider's HTTP or
// JSON-RPC answer, a timeout, or the SDK's error.
func describe(ctx context.Context, err error) error {
	var status *statusError
	var wire *jsonrpc.Error
	switch {
	case errors.As(err, &status):
		return status
	case errors.Is(err, errUnreachable):
		return errUnreachable
	case errors.As(err, &wire):
		return fmt.Errorf("MCP error %d: %s", wire.Code, truncateForMessage(wire.Message, 256))
	case ctx.Err() != nil:
		return fmt.Errorf("request timed out or was cancelled: %w", ctx.Err())
	}
	return err
}

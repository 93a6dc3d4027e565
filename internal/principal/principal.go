package principal

import (
	"fmt"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/apperr"
)

// OriginatorPrefix begins the originator of every thread a principal
// creates, whichever door it comes through: "appserver-http/<name>". The
// originator is what a thread's visibility is decided by; the operator's
// threads carry their client's name instead.
const OriginatorPrefix = "appserver-http/"

// NameRE is what a principal may be called: a TOML bare key of 1 to 64
// characters, safe as a path component.
var NameRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,64}$`)

// Config is the principals' configuration.
type Config struct {
	// Roots maps each principal's name to its workspace roots: absolute
	// directories. A principal with none gets WorkspacesDir/<name>.
	Roots map[string][]string
	// Ceiling bounds every principal's sandbox and approval policy.
	Ceiling Ceiling
	// WorkspacesDir holds the default root of each principal without roots
	// of its own, created (0700) on first use. Required when such a
	// principal is configured.
	WorkspacesDir string
	// Reserved are the daemon's own files and directories (data
	// directory, config file, token and secret files): no root may be,
	// contain or lie inside one, and no path a principal names may reach
	// one.
	Reserved []string
}

// Rules are the principals of one configuration. They are immutable after
// New and safe for concurrent use.
type Rules struct {
	ceiling  Ceiling
	roots    map[string][]string // by name, cleaned; the first is the default cwd
	defaults map[string]bool     // names whose root is the WorkspacesDir default
	reserved []string
}

// New checks cfg: names, absolute roots, no root at "/", inside or around
// the daemon's own state, or overlapping another principal's.
func New(cfg Config) (*Rules, error) {
	r := &Rules{ceiling: cfg.Ceiling, roots: map[string][]string{}, defaults: map[string]bool{}}
	if err := cfg.Ceiling.validate(); err != nil {
		return nil, err
	}
	for _, p := range cfg.Reserved {
		if p == "" {
			continue
		}
		if !filepath.IsAbs(p) {
			return nil, apperr.New(apperr.Invalid, "principals: reserved path %q is not absolute", p)
		}
		r.reserved = append(r.reserved, filepath.Clean(p))
	}
	names := make([]string, 0, len(cfg.Roots))
	for name := range cfg.Roots {
		names = append(names, name)
	}
	sort.Strings(names)
	type owned struct{ name, root string }
	var all []owned
	for _, name := range names {
		if !NameRE.MatchString(name) {
			return nil, apperr.New(apperr.Invalid, "principal %q: names are 1-64 characters from A-Z, a-z, 0-9, '_' and '-'", name)
		}
		roots := cfg.Roots[name]
		if len(roots) == 0 {
			if cfg.WorkspacesDir == "" || !filepath.IsAbs(cfg.WorkspacesDir) {
				return nil, apperr.New(apperr.Invalid, "principal %q has no workspace_roots and http_api.principal_workspaces is not an absolute directory", name)
			}
			roots = []string{filepath.Join(cfg.WorkspacesDir, name)}
			r.defaults[name] = true
		}
		clean := make([]string, 0, len(roots))
		for _, root := range roots {
			if !filepath.IsAbs(root) {
				return nil, apperr.New(apperr.Invalid, "principal %q: workspace root %q is not an absolute path", name, root)
			}
			root = filepath.Clean(root)
			if root == "/" {
				return nil, apperr.New(apperr.Invalid, "principal %q: workspace root \"/\" would give it the whole file system", name)
			}
			for _, res := range r.reserved {
				if within(root, res) || within(res, root) {
					return nil, apperr.New(apperr.Invalid, "principal %q: workspace root %s overlaps the daemon's own %s", name, root, res)
				}
			}
			for _, o := range all {
				if o.name != name && (within(root, o.root) || within(o.root, root)) {
					return nil, apperr.New(apperr.Invalid, "principals %q and %q have overlapping workspace roots (%s, %s); every principal needs roots of its own", o.name, name, o.root, root)
				}
			}
			all = append(all, owned{name, root})
			clean = append(clean, root)
		}
		r.roots[name] = clean
	}
	return r, nil
}

// Get returns the principal of that name; false when none is configured.
func (r *Rules) Get(name string) (Principal, bool) {
	if r == nil {
		return Principal{}, false
	}
	if _, ok := r.roots[name]; !ok {
		return Principal{}, false
	}
	return Principal{name: name, rules: r}, true
}

// Names lists the configured principals, sorted.
func (r *Rules) Names() []string {
	if r == nil {
		return nil
	}
	out := make([]string, 0, len(r.roots))
	for n := range r.roots {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// NameOf is the principal a thread originator names, "" for the
// operator's threads.
func NameOf(originator string) string {
	name, ok := strings.CutPrefix(originator, OriginatorPrefix)
	if !ok || !NameRE.MatchString(name) {
		return ""
	}
	return name
}

// Principal is who a request acts for. The zero value is the operator,
// who sees every thread and has no ceiling.
type Principal struct {
	name  string
	rules *Rules
}

// Operator is the principal with no limits.
func Operator() Principal { return Principal{} }

// IsOperator reports whether p is the operator.
func (p Principal) IsOperator() bool { return p.rules == nil }

// Name is the principal's configured name, "" for the operator.
func (p Principal) Name() string { return p.name }

// String names the principal in logs and messages.
func (p Principal) String() string {
	if p.IsOperator() {
		return "operator"
	}
	return fmt.Sprintf("principal %q", p.name)
}

// OperatorLogName is how logs name the operator: in parentheses, which no
// principal's name holds.
const OperatorLogName = "(operator)"

// LogName names the principal in access logs: its name, or
// OperatorLogName.
func (p Principal) LogName() string {
	if p.IsOperator() {
		return OperatorLogName
	}
	return p.name
}

// Originator is the originator of the threads the principal creates; ""
// for the operator, whose threads carry the client's own name.
func (p Principal) Originator() string {
	if p.IsOperator() {
		return ""
	}
	return OriginatorPrefix + p.name
}

// ClientName is the originator a door records on a thread the principal
// creates: the principal's own, or for the operator the door's name
// (clientName).
func (p Principal) ClientName(clientName string) string {
	if p.IsOperator() {
		return clientName
	}
	return p.Originator()
}

// Sees reports whether the principal may see and use a thread: the
// operator every thread, a principal those it created.
func (p Principal) Sees(th api.Thread) bool { return p.SeesOriginator(th.Originator) }

// SeesOriginator is Sees for a thread known by its originator (nil when
// the thread has none).
func (p Principal) SeesOriginator(originator *string) bool {
	return p.IsOperator() || (originator != nil && *originator == p.Originator())
}

// Roots are the principal's workspace roots as configured (cleaned); nil
// for the operator.
func (p Principal) Roots() []string {
	if p.IsOperator() {
		return nil
	}
	return slices.Clone(p.rules.roots[p.name])
}

// Ceiling is the principal's sandbox and approval ceiling; the zero
// Ceiling (for the operator) bounds nothing.
func (p Principal) Ceiling() (Ceiling, bool) {
	if p.IsOperator() {
		return Ceiling{}, false
	}
	return p.rules.ceiling, true
}

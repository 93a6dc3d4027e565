package clientfs

import (
	"context"
	"log/slog"
	"time"

	"github.com/appserver/appserver/internal/apperr"
	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/principal"
)

// The defaults of Config.
const (
	// DefaultMaxFileBytes bounds what fs/readFile returns and fs/writeFile
	// writes: 12 MiB, whose base64 (16 MiB) is the websocket's frame
	// limit.
	DefaultMaxFileBytes = 12 << 20
	// DefaultMaxDirEntries bounds an fs/readDirectory listing.
	DefaultMaxDirEntries = 100_000
	// DefaultMaxWatchesPerConn bounds one connection's watches.
	DefaultMaxWatchesPerConn = 256
	// DefaultMaxWatches bounds the directories watched for all
	// connections together (each is an inotify watch).
	DefaultMaxWatches = 4096
	// DefaultWatchDelay is how long a watch gathers changes before it
	// reports them, as the reference does.
	DefaultWatchDelay = 200 * time.Millisecond
	// DefaultMaxSearchEntries bounds the files and directories one search
	// walks (and a session keeps).
	DefaultMaxSearchEntries = 200_000
	// DefaultMaxSessionsPerConn bounds one connection's search sessions.
	DefaultMaxSessionsPerConn = 4
	// DefaultMaxWalks bounds the searches walking at once, for all
	// connections together; others wait their turn.
	DefaultMaxWalks = 4
	// MaxResults is how many matches a search returns, as the reference.
	MaxResults = 50
)

// Config configures a Service. Zero values get the defaults noted.
type Config struct {
	// Guard is the path rule every path goes through; nil masks nothing
	// (tests).
	Guard *fsguard.Guard
	// Logger gets what clients are not told; nil discards.
	Logger *slog.Logger
	// MaxFileBytes bounds file contents read and written; 0 is
	// DefaultMaxFileBytes.
	MaxFileBytes int64
	// MaxDirEntries bounds a directory listing; 0 is
	// DefaultMaxDirEntries.
	MaxDirEntries int
	// MaxWatchesPerConn and MaxWatches bound watches; 0 is the default.
	MaxWatchesPerConn, MaxWatches int
	// WatchDelay is how long a watch gathers changes; 0 is
	// DefaultWatchDelay.
	WatchDelay time.Duration
	// MaxSearchEntries bounds what a search walks; 0 is
	// DefaultMaxSearchEntries.
	MaxSearchEntries int
	// MaxSessionsPerConn bounds search sessions; 0 is the default.
	MaxSessionsPerConn int
	// MaxWalks bounds concurrent search walks; 0 is DefaultMaxWalks.
	MaxWalks int
}

// Service serves the file system methods. Its watches and search
// sessions run until their connection closes (CloseConn) or Stop.
type Service struct {
	cfg   Config
	guard *fsguard.Guard
	log   *slog.Logger
	walks chan struct{}

	watches  *watchHub
	searches *searchHub
}

// New returns a Service; nothing runs until a watch or a session starts.
func New(cfg Config) *Service {
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.MaxFileBytes <= 0 {
		cfg.MaxFileBytes = DefaultMaxFileBytes
	}
	if cfg.MaxDirEntries <= 0 {
		cfg.MaxDirEntries = DefaultMaxDirEntries
	}
	if cfg.MaxWatchesPerConn <= 0 {
		cfg.MaxWatchesPerConn = DefaultMaxWatchesPerConn
	}
	if cfg.MaxWatches <= 0 {
		cfg.MaxWatches = DefaultMaxWatches
	}
	if cfg.WatchDelay <= 0 {
		cfg.WatchDelay = DefaultWatchDelay
	}
	if cfg.MaxSearchEntries <= 0 {
		cfg.MaxSearchEntries = DefaultMaxSearchEntries
	}
	if cfg.MaxSessionsPerConn <= 0 {
		cfg.MaxSessionsPerConn = DefaultMaxSessionsPerConn
	}
	if cfg.MaxWalks <= 0 {
		cfg.MaxWalks = DefaultMaxWalks
	}
	s := &Service{cfg: cfg, guard: cfg.Guard, log: cfg.Logger, walks: make(chan struct{}, cfg.MaxWalks)}
	s.watches = newWatchHub(s)
	s.searches = newSearchHub(s)
	return s
}

// Stop ends every watch and search session and waits for their
// goroutines. It may be called more than once, and without any use.
func (s *Service) Stop() {
	s.searches.stop()
	s.watches.stop()
}

// Conn is the connection a request comes from: what its notifications
// and its watches and sessions are bound to.
type Conn struct {
	// ID is the connection's process-unique id.
	ID uint64
	// Access is what the connection's caller may reach (AccessOf).
	Access fsguard.Access
	// Notify sends a notification to the connection; it must not block.
	Notify func(method string, params any)
}

// CloseConn ends the watches, search sessions and searches of a closed
// connection and waits for their goroutines.
func (s *Service) CloseConn(id uint64) {
	s.watches.closeConn(id)
	s.searches.closeConn(id)
}

// AccessOf is what a caller's file system methods reach: everything (but
// what the path rule refuses to all) for the operator, as the reference
// does; a principal's workspace roots otherwise, its default root
// created on first use.
func AccessOf(p principal.Principal) (fsguard.Access, error) {
	if p.IsOperator() {
		return fsguard.Access{Read: []string{"/"}, Write: []policy.WritableRoot{{Root: "/"}}, HostProc: true}, nil
	}
	if _, err := p.DefaultRoot(); err != nil {
		return fsguard.Access{}, err
	}
	return fsguard.Dirs(p.Roots()...), nil
}

// acquireWalk waits for a walk slot; release it with releaseWalk.
func (s *Service) acquireWalk(ctx context.Context) error {
	select {
	case s.walks <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (s *Service) releaseWalk() { <-s.walks }

// invalid is a refused request, answered -32600 with msg.
func invalid(format string, args ...any) error {
	return apperr.New(apperr.Invalid, format, args...)
}

// Open counts the watches and search sessions open, for all connections
// together (diagnostics and tests).
func (s *Service) Open() (watches, sessions int) {
	s.watches.mu.Lock()
	for _, ws := range s.watches.conns {
		watches += len(ws)
	}
	s.watches.mu.Unlock()
	s.searches.mu.Lock()
	for _, ss := range s.searches.sessions {
		sessions += len(ss)
	}
	s.searches.mu.Unlock()
	return watches, sessions
}

// CheckName reports whether a may reach path for op by name, as
// fsguard.Guard.CheckName does: for paths kept to be opened later by
// code that does not go through the guard (extra skill roots).
func (s *Service) CheckName(a fsguard.Access, path string, op fsguard.Op) error {
	return s.guard.CheckName(a, path, op)
}

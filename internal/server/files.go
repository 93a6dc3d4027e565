package server

import (
	"context"
	"sync"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/clientfs"
	"github.com/appserver/appserver/internal/fsguard"
)

// registerFiles serves the fs/* methods and the fuzzy file search
// (docs/protocol.md §4.34, §4.35) with svc, for the operator and for
// principals alike: clientfs.AccessOf decides what each reaches. A
// connection's watches, sessions and searches end when it closes.
func (s *Server) registerFiles(svc *clientfs.Service) {
	f := &files{srv: s, svc: svc, open: map[uint64]bool{}}
	path := []string{"path"}
	s.Handle(api.MethodFsReadFile, fsMethod(f, []string{"path"}, svc.ReadFile))
	s.Handle(api.MethodFsWriteFile, fsMethod(f, []string{"path", "dataBase64"}, svc.WriteFile))
	s.Handle(api.MethodFsCreateDirectory, fsMethod(f, path, svc.CreateDirectory))
	s.Handle(api.MethodFsGetMetadata, fsMethod(f, path, svc.GetMetadata))
	s.Handle(api.MethodFsReadDirectory, fsMethod(f, path, svc.ReadDirectory))
	s.Handle(api.MethodFsRemove, fsMethod(f, path, svc.Remove))
	s.Handle(api.MethodFsCopy, fsMethod(f, []string{"sourcePath", "destinationPath"}, svc.Copy))
	s.Handle(api.MethodFsWatch, connMethod(f, []string{"watchId", "path"}, func(ctx context.Context, _ *Call, c clientfs.Conn, p api.FsWatchParams) (any, error) {
		return svc.Watch(ctx, c, p)
	}))
	s.Handle(api.MethodFsUnwatch, connMethod(f, []string{"watchId"}, func(_ context.Context, _ *Call, c clientfs.Conn, p api.FsUnwatchParams) (any, error) {
		return svc.Unwatch(c, p), nil
	}))
	s.Handle(api.MethodFuzzyFileSearch, connMethod(f, []string{"query", "roots"}, func(ctx context.Context, _ *Call, c clientfs.Conn, p api.FuzzyFileSearchParams) (any, error) {
		return svc.Search(ctx, c, p)
	}))
	s.Handle(api.MethodFuzzyFileSearchSessionStart, connMethod(f, []string{"sessionId", "roots"}, func(ctx context.Context, call *Call, c clientfs.Conn, p api.FuzzyFileSearchSessionStartParams) (any, error) {
		start, err := svc.StartSession(ctx, c, p)
		if err != nil {
			return nil, err
		}
		call.After(start)
		return api.FuzzyFileSearchSessionStartResult{}, nil
	}))
	s.Handle(api.MethodFuzzyFileSearchSessionUpdate, connMethod(f, []string{"sessionId", "query"}, func(_ context.Context, call *Call, c clientfs.Conn, p api.FuzzyFileSearchSessionUpdateParams) (any, error) {
		apply, err := svc.UpdateSession(c, p)
		if err != nil {
			return nil, err
		}
		call.After(apply)
		return api.FuzzyFileSearchSessionUpdateResult{}, nil
	}))
	s.Handle(api.MethodFuzzyFileSearchSessionStop, connMethod(f, []string{"sessionId"}, func(_ context.Context, _ *Call, c clientfs.Conn, p api.FuzzyFileSearchSessionStopParams) (any, error) {
		return svc.StopSession(c, p), nil
	}))
	s.registerExternalAgent(f)
}

// files adapts the sessions to clientfs: who a connection acts for, its
// notifications, and the end of its watches and sessions with it.
type files struct {
	srv *Server
	svc *clientfs.Service

	mu   sync.Mutex
	open map[uint64]bool // connections whose closing ends their file state
}

// conn is the clientfs view of a request's connection.
func (f *files) conn(sess *Session) (clientfs.Conn, error) {
	access, err := clientfs.AccessOf(sess.Principal())
	if err != nil {
		return clientfs.Conn{}, err
	}
	f.mu.Lock()
	first := !f.open[sess.id]
	f.open[sess.id] = true
	f.mu.Unlock()
	if first {
		sess.OnClose(func() {
			f.svc.CloseConn(sess.id)
			f.mu.Lock()
			delete(f.open, sess.id)
			f.mu.Unlock()
		})
	}
	return clientfs.Conn{ID: sess.id, Access: access, Notify: func(method string, params any) {
		if n, err := f.srv.NewNotification(method, params); err == nil {
			sess.Notify(n)
		}
	}}, nil
}

// connMethod decodes a method's params (required names the members that
// must be present) and runs do with the request's connection.
func connMethod[P any](f *files, required []string, do func(context.Context, *Call, clientfs.Conn, P) (any, error)) Method {
	return func(ctx context.Context, call *Call) (any, error) {
		var p P
		if err := DecodeParams(call, &p, required...); err != nil {
			return nil, err
		}
		c, err := f.conn(call.Session)
		if err != nil {
			return nil, err
		}
		return do(ctx, call, c, p)
	}
}

// fsMethod is connMethod for the file operations, which need only what
// the caller may reach.
func fsMethod[P, R any](f *files, required []string, do func(context.Context, fsguard.Access, P) (R, error)) Method {
	return connMethod(f, required, func(ctx context.Context, _ *Call, c clientfs.Conn, p P) (any, error) {
		return do(ctx, c.Access, p)
	})
}

//go:build unix

package execsession

import (
	"sync"
)

// Supervisor holds the Managers of every thread of the daemon, so that
// unloading a thread reaps its sessions and daemon shutdown reaps all of
// them. It is safe for concurrent use.
type Supervisor struct {
	cfg ManagerConfig

	mu       sync.Mutex
	closed   bool
	managers map[string]*Manager
}

// NewSupervisor returns a Supervisor whose Managers use cfg (ThreadID is set
// per thread).
func NewSupervisor(cfg ManagerConfig) *Supervisor {
	return &Supervisor{cfg: cfg, managers: map[string]*Manager{}}
}

// Manager returns the thread's Manager, creating it on first use. It fails
// with ErrClosed once the Supervisor is closed.
func (s *Supervisor) Manager(threadID string) (*Manager, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil, ErrClosed
	}
	m := s.managers[threadID]
	if m == nil {
		cfg := s.cfg
		cfg.ThreadID = threadID
		m = NewManager(cfg)
		s.managers[threadID] = m
	}
	return m, nil
}

// Release closes the thread's Manager (killing its sessions) and forgets
// it; call it when the thread is unloaded. Unknown threads are ignored.
func (s *Supervisor) Release(threadID string) error {
	s.mu.Lock()
	m := s.managers[threadID]
	delete(s.managers, threadID)
	s.mu.Unlock()
	if m == nil {
		return nil
	}
	return m.Close()
}

// existing returns the thread's Manager if it has one, without creating
// it: a thread that never ran a session has none to list or end.
func (s *Supervisor) existing(threadID string) *Manager {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.managers[threadID]
}

// ThreadSessions lists the live sessions of a thread, by id.
func (s *Supervisor) ThreadSessions(threadID string) []SessionInfo {
	if m := s.existing(threadID); m != nil {
		return m.Sessions()
	}
	return nil
}

// TerminateSession kills one session of a thread; it fails with
// *UnknownSessionError when the thread has no such session.
func (s *Supervisor) TerminateSession(threadID string, id int) error {
	m := s.existing(threadID)
	if m == nil {
		return &UnknownSessionError{ID: id}
	}
	return m.Terminate(id)
}

// TerminateThreadSessions kills every session of a thread.
func (s *Supervisor) TerminateThreadSessions(threadID string) {
	if m := s.existing(threadID); m != nil {
		m.TerminateAll()
	}
}

// LiveSessions counts the live sessions of all threads.
func (s *Supervisor) LiveSessions() int {
	s.mu.Lock()
	ms := make([]*Manager, 0, len(s.managers))
	for _, m := range s.managers {
		ms = append(ms, m)
	}
	s.mu.Unlock()
	n := 0
	for _, m := range ms {
		n += len(m.Sessions())
	}
	return n
}

// Close closes every Manager concurrently and waits for them: every session
// process tree is killed and reaped, every session goroutine has returned.
// Later Manager calls fail with ErrClosed. It is safe to call more than
// once.
func (s *Supervisor) Close() error {
	s.mu.Lock()
	s.closed = true
	ms := make([]*Manager, 0, len(s.managers))
	for id, m := range s.managers {
		ms = append(ms, m)
		delete(s.managers, id)
	}
	s.mu.Unlock()
	var wg sync.WaitGroup
	for _, m := range ms {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_ = m.Close()
		}()
	}
	wg.Wait()
	return nil
}

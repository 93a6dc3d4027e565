package policy

import (
	"encoding/json"
	"path/filepath"
	"slices"
	"sync"
)

// SessionApprovals is what one thread has learned from its approvals:
// commands and patch files approved for the session, exec-policy allow
// prefixes accepted as amendments, writable roots granted for the session,
// and network host rules. It is safe for concurrent use. A nil
// *SessionApprovals remembers nothing and approves nothing.
type SessionApprovals struct {
	mu       sync.Mutex
	keys     map[string]bool
	rules    *RuleSet
	prefixes [][]string
	roots    []string
	network  []NetworkAmendment
}

// NewSessionApprovals returns an empty store.
func NewSessionApprovals() *SessionApprovals {
	return &SessionApprovals{keys: map[string]bool{}, rules: NewRuleSet()}
}

// CommandApprovalKey identifies a command for acceptForSession: the same
// argv in the same directory with the same sandbox request.
func CommandApprovalKey(argv []string, cwd string, perms SandboxPermissions) string {
	b, _ := json.Marshal(struct {
		Command []string `json:"command"`
		Cwd     string   `json:"cwd"`
		Perms   string   `json:"sandbox_permissions"`
	}{argv, cwd, perms.String()})
	return "exec:" + string(b)
}

// PatchApprovalKeys identifies the files of a patch for acceptForSession:
// one key per absolute path, so a later patch touching a subset of approved
// files is approved too.
func PatchApprovalKeys(p Patch) []string {
	var keys []string
	for _, path := range p.TouchedPaths() {
		k := "patch:" + path
		if !slices.Contains(keys, k) {
			keys = append(keys, k)
		}
	}
	return keys
}

// IsApproved reports whether every key was approved for the session; an
// empty key list is never approved.
func (s *SessionApprovals) IsApproved(keys []string) bool {
	if s == nil || len(keys) == 0 {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		if !s.keys[k] {
			return false
		}
	}
	return true
}

// Approve remembers each key as approved for the session.
func (s *SessionApprovals) Approve(keys []string) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, k := range keys {
		s.keys[k] = true
	}
}

// AddAllowPrefix records an accepted exec-policy amendment: commands starting
// with prefix are allowed by rule (and so run outside the sandbox) for the
// rest of the session. Adding the same prefix twice is a no-op.
func (s *SessionApprovals) AddAllowPrefix(prefix []string) error {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.ContainsFunc(s.prefixes, func(p []string) bool { return slices.Equal(p, prefix) }) {
		return nil
	}
	if err := s.rules.AddPrefixRule(prefix, Allow); err != nil {
		return err
	}
	s.prefixes = append(s.prefixes, slices.Clone(prefix))
	return nil
}

// AllowPrefixes returns the accepted amendments in order.
func (s *SessionApprovals) AllowPrefixes() [][]string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([][]string, len(s.prefixes))
	for i, p := range s.prefixes {
		out[i] = slices.Clone(p)
	}
	return out
}

// Rules returns the session's learned rules, to be evaluated together with
// the loaded rules; nil for a nil store.
func (s *SessionApprovals) Rules() *RuleSet {
	if s == nil {
		return nil
	}
	return s.rules
}

// GrantRoot makes root (absolute) writable for patches for the rest of the
// session, as a fileChange approval with grantRoot accepted for the session
// does.
func (s *SessionApprovals) GrantRoot(root string) {
	if s == nil || !filepath.IsAbs(root) {
		return
	}
	root = filepath.Clean(root)
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.roots, root) {
		s.roots = append(s.roots, root)
	}
}

// GrantedRoots returns the roots granted for the session.
func (s *SessionApprovals) GrantedRoots() []string {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.roots)
}

// WritableRoots returns the granted roots as writable roots, each with the
// default protected subpaths.
func (s *SessionApprovals) WritableRoots() []WritableRoot {
	var out []WritableRoot
	for _, r := range s.GrantedRoots() {
		out = append(out, NewWritableRoot(r, false))
	}
	return out
}

// AddNetworkAmendment records a host rule chosen by the user.
func (s *SessionApprovals) AddNetworkAmendment(a NetworkAmendment) {
	if s == nil {
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.network = append(s.network, a)
}

// NetworkAmendments returns the recorded host rules in order.
func (s *SessionApprovals) NetworkAmendments() []NetworkAmendment {
	if s == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.network)
}

package policy_test

import (
	"fmt"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/policy"
)

func TestSessionApprovalsBasics(t *testing.T) {
	s := policy.NewSessionApprovals()
	k1 := policy.CommandApprovalKey(argv("ls -la"), "/w", policy.UseDefault)
	k2 := policy.CommandApprovalKey(argv("ls -la"), "/w", policy.RequireEscalated)
	k3 := policy.CommandApprovalKey([]string{"ls", "-la"}, "/w", policy.UseDefault)
	assert.NotEqual(t, k1, k2)
	assert.Equal(t, k1, k3)
	assert.NotEqual(t, policy.CommandApprovalKey([]string{"a b"}, "/", 0), policy.CommandApprovalKey([]string{"a", "b"}, "/", 0))

	assert.False(t, s.IsApproved(nil), "no keys is never approved")
	assert.False(t, s.IsApproved([]string{k1}))
	s.Approve([]string{k1})
	assert.True(t, s.IsApproved([]string{k1}))
	assert.False(t, s.IsApproved([]string{k1, k2}), "all keys must be approved")

	require.NoError(t, s.AddAllowPrefix(argv("make")))
	require.NoError(t, s.AddAllowPrefix(argv("make")))
	assert.Equal(t, [][]string{argv("make")}, s.AllowPrefixes(), "duplicates are ignored")
	assert.Len(t, s.Rules().Rules(), 1)
	assert.Error(t, s.AddAllowPrefix(nil))

	var nilStore *policy.SessionApprovals
	nilStore.Approve([]string{k1})
	assert.False(t, nilStore.IsApproved([]string{k1}))
	assert.NoError(t, nilStore.AddAllowPrefix(argv("x")))
	assert.Nil(t, nilStore.Rules())
	assert.Nil(t, nilStore.AllowPrefixes())
	assert.Nil(t, nilStore.GrantedRoots())
	assert.Nil(t, nilStore.WritableRoots())
	nilStore.GrantRoot("/x")
	nilStore.AddNetworkAmendment(policy.NetworkAmendment{Host: "a", Action: "allow"})
	assert.Nil(t, nilStore.NetworkAmendments())

	p := policy.Patch{Cwd: "/w", Changes: []policy.FileChange{add("a"), move("b", "c"), update("a")}}
	assert.Equal(t, []string{"patch:/w/a", "patch:/w/b", "patch:/w/c"}, policy.PatchApprovalKeys(p))
}

// TestSessionApprovalsConcurrent exercises the store from many goroutines;
// run with -race.
func TestSessionApprovalsConcurrent(t *testing.T) {
	s := policy.NewSessionApprovals()
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 50 {
				key := fmt.Sprintf("k-%d-%d", g, i)
				s.Approve([]string{key})
				if !s.IsApproved([]string{key}) {
					t.Errorf("key %s not remembered", key)
				}
				_ = s.AddAllowPrefix([]string{"tool", fmt.Sprint(i)})
				s.GrantRoot(fmt.Sprintf("/root/%d", i))
				s.AddNetworkAmendment(policy.NetworkAmendment{Host: key, Action: "allow"})
				_ = policy.PlanExec(policy.ExecRequest{Command: []string{"tool", fmt.Sprint(i), "x"}, Cwd: "/w", Approval: untrusted, Sandbox: workspace, Session: s})
				_ = s.AllowPrefixes()
				_ = s.GrantedRoots()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, s.AllowPrefixes(), 50)
	assert.Len(t, s.GrantedRoots(), 50)
	assert.Len(t, s.NetworkAmendments(), 400)
	for i := range 50 {
		p := policy.PlanExec(policy.ExecRequest{Command: []string{"tool", fmt.Sprint(i), "x"}, Cwd: "/w", Approval: untrusted, Sandbox: workspace, Session: s})
		assert.Equal(t, policy.ActionRunUnsandboxed, p.Action, "learned prefix %d", i)
	}
}

// TestRuleSetConcurrent checks the rule set under concurrent reads and adds.
func TestRuleSetConcurrent(t *testing.T) {
	rs := policy.NewRuleSet()
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range 100 {
				_ = rs.AddPrefixRule([]string{"p", fmt.Sprint(g, i)}, policy.Allow)
			}
		}()
		go func() {
			defer wg.Done()
			for i := range 100 {
				_ = rs.Check([]string{"p", fmt.Sprint(g, i)}, nil)
				_ = rs.Rules()
			}
		}()
	}
	wg.Wait()
	assert.Len(t, rs.Rules(), 400)
}

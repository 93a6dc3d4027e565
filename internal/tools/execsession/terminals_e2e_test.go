package execsession_test

import (
	"encoding/json"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/internal/apptest"
)

// The commands the model leaves running (exec sessions) are the thread's
// background terminals: listed page by page, ended one by one or all at
// once.
func TestBackgroundTerminals(t *testing.T) {
	ws := apptest.Workspace(t)
	calls := `[{"call_id":"call_a","name":"exec_command","arguments":{"cmd":"exec sleep 60","yield_time_ms":300}},` +
		`{"call_id":"call_b","name":"exec_command","arguments":{"cmd":"exec sleep 61","yield_time_ms":300}}]`
	_, _, r := apptest.StartWithFake(t, apptest.CallScript(calls, "call_b", "running"))
	threadID := apptest.StartThread(t, r, map[string]any{"cwd": ws, "sandbox": "danger-full-access"})
	apptest.Turn(t, r, apptest.Input(threadID, "go"), nil)

	type terminal struct {
		ProcessID string `json:"processId"`
		ItemID    string `json:"itemId"`
		Command   string `json:"command"`
		Cwd       string `json:"cwd"`
		OsPid     int    `json:"osPid"`
	}
	list := func(params map[string]any) ([]terminal, *string) {
		t.Helper()
		params["threadId"] = threadID
		res := r.Call("thread/backgroundTerminals/list", params)
		apptest.ValidateSchema(t, "ThreadBackgroundTerminalsListResponse", res)
		var out struct {
			Data       []terminal `json:"data"`
			NextCursor *string    `json:"nextCursor"`
		}
		require.NoError(t, json.Unmarshal(res, &out))
		return out.Data, out.NextCursor
	}
	all, next := list(map[string]any{})
	require.Nil(t, next)
	require.Len(t, all, 2)
	byItem := map[string]terminal{}
	for _, tm := range all {
		require.Equal(t, ws, tm.Cwd)
		require.NoError(t, syscall.Kill(tm.OsPid, 0), "a listed terminal is running")
		byItem[tm.ItemID] = tm
	}
	require.Contains(t, byItem["call_a"].Command, "sleep 60")
	require.Contains(t, byItem["call_b"].Command, "sleep 61")

	// Pages of one, in the order of the full list.
	first, next := list(map[string]any{"limit": 1})
	require.Equal(t, all[:1], first)
	require.NotNil(t, next)
	second, last := list(map[string]any{"limit": 1, "cursor": *next})
	require.Equal(t, all[1:], second)
	require.Nil(t, last)

	gone := func(pid int) {
		t.Helper()
		// The leader is reaped by its session's waiter, just after the kill.
		require.Eventually(t, func() bool { return errors.Is(syscall.Kill(pid, 0), syscall.ESRCH) }, 10*time.Second, 20*time.Millisecond)
	}
	terminate := func(processID string) bool {
		t.Helper()
		res := r.Call("thread/backgroundTerminals/terminate", map[string]any{"threadId": threadID, "processId": processID})
		apptest.ValidateSchema(t, "ThreadBackgroundTerminalsTerminateResponse", res)
		var out struct {
			Terminated bool `json:"terminated"`
		}
		require.NoError(t, json.Unmarshal(res, &out))
		return out.Terminated
	}
	a, b := byItem["call_a"], byItem["call_b"]
	require.True(t, terminate(a.ProcessID))
	gone(a.OsPid)
	require.False(t, terminate(a.ProcessID), "already ended")
	require.False(t, terminate("not-a-process"))
	left, _ := list(map[string]any{})
	require.Equal(t, []terminal{b}, left)
	require.NoError(t, syscall.Kill(b.OsPid, 0), "the other terminal still runs")

	res := r.Call("thread/backgroundTerminals/clean", map[string]any{"threadId": threadID})
	apptest.ValidateSchema(t, "ThreadBackgroundTerminalsCleanResponse", res)
	gone(b.OsPid)
	left, _ = list(map[string]any{})
	require.Empty(t, left)

	f := r.CallRaw("thread/backgroundTerminals/list", map[string]any{"threadId": threadID, "cursor": "x1"})
	require.NotNil(t, f.Error)
}

package server_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/api/schema"
	"github.com/appserver/appserver/internal/clientfs"
	"github.com/appserver/appserver/internal/fsguard"
	"github.com/appserver/appserver/internal/hub"
	"github.com/appserver/appserver/internal/server"
	"github.com/appserver/appserver/internal/server/rpcws"
	"github.com/appserver/appserver/internal/store/memory"
	"github.com/appserver/appserver/internal/turns"
)

// fullServer is a server with every optional part configured, as the
// daemon builds it, so that its method table is the daemon's.
func fullServer(t *testing.T) *server.Server {
	t.Helper()
	h := hub.New(hub.Config{Encode: rpcws.EncodeNotification})
	m, err := turns.New(turns.Config{
		Store: memory.New(memory.Config{}), Sink: h, Ephemeral: memory.New(memory.Config{}), Models: noModels{},
		Defaults: turns.Defaults{Model: "fake", ModelProvider: "fake", Cwd: t.TempDir()},
	})
	require.NoError(t, err)
	t.Cleanup(m.Stop)
	guard, err := fsguard.New(fsguard.Config{})
	require.NoError(t, err)
	srv, err := server.New(server.Config{
		Hub: h, Threads: m, Cwd: t.TempDir(),
		Feedback:    &server.FeedbackConfig{Guard: guard},
		CommandExec: &server.CommandExecConfig{},
		Processes:   &server.ProcessConfig{},
		Skills:      noSkills{},
		MCP:         &server.MCPConfig{},
		Terminals:   noTerminals{},
		Files:       clientfs.New(clientfs.Config{}),
		Features:    noFeatures{},
	})
	require.NoError(t, err)
	return srv
}

// noFeatures has no feature switches.
type noFeatures struct{}

func (noFeatures) ExperimentalFeatures(string, map[string]bool) []api.ExperimentalFeature { return nil }
func (noFeatures) SetFeatures(context.Context, string, map[string]bool) (map[string]bool, error) {
	return map[string]bool{}, nil
}

// noSkills lists no skills.
type noSkills struct{}

func (noSkills) SkillsList(context.Context, api.SkillsListParams, string, []string) (api.SkillsListResult, error) {
	return api.SkillsListResult{}, nil
}

// noTerminals has no background terminals.
type noTerminals struct{}

func (noTerminals) BackgroundTerminals(string) []api.ThreadBackgroundTerminal { return nil }
func (noTerminals) TerminateBackgroundTerminal(string, string) bool           { return false }
func (noTerminals) CleanBackgroundTerminals(string)                           {}

// servedBy says what appserver serves: a client request when srv's method
// table has it, a client notification always (the session accepts every
// one and acts on none), a notification or server request when the
// daemon's code names it (schema.Named).
func servedBy(t *testing.T, srv *server.Server, p *schema.Protocol) func(schema.Method) bool {
	t.Helper()
	var others []string
	for _, m := range p.Methods {
		if m.Kind != schema.ClientRequest {
			others = append(others, m.Name)
		}
	}
	named, err := schema.Named(filepath.Join("..", ".."), others)
	require.NoError(t, err)
	methods := srv.Methods()
	return func(m schema.Method) bool {
		switch m.Kind {
		case schema.ClientRequest:
			return slices.Contains(methods, m.Name)
		case schema.ClientNotification:
			return true
		}
		return len(named[m.Name]) > 0
	}
}

// TestProtocolDrift fails when a method of the target schema is neither
// served nor listed in api.Unserved with a reason, or is both: the method
// table and Unserved must agree with each other and with the schema.
func TestProtocolDrift(t *testing.T) {
	p, err := schema.Target()
	require.NoError(t, err)
	srv := fullServer(t)
	for _, problem := range schema.Drift(p, servedBy(t, srv, p), api.Unserved) {
		t.Error(problem)
	}
	for _, m := range srv.Methods() {
		if _, ok := api.ClientMethods[m]; !ok {
			t.Errorf("the method table serves %s, which the %s schema does not have", m, p.Version)
		}
	}
}

// TestProtocolDriftNoticesNewMethods runs the drift check on a copy of
// the schema with one client method and one notification added
// (testdata/schema-additions.json): both must be reported.
func TestProtocolDriftNoticesNewMethods(t *testing.T) {
	stable, exp, err := schema.Bundles()
	require.NoError(t, err)
	add, err := os.ReadFile(filepath.Join("testdata", "schema-additions.json"))
	require.NoError(t, err)
	var additions map[string][]any
	require.NoError(t, json.Unmarshal(add, &additions))
	var b map[string]any
	require.NoError(t, json.Unmarshal(exp, &b))
	defs := b["definitions"].(map[string]any)
	for family, variants := range additions {
		def := defs[family].(map[string]any)
		def["oneOf"] = append(def["oneOf"].([]any), variants...)
	}
	modified, err := json.Marshal(b)
	require.NoError(t, err)
	p, err := schema.Load(api.ProtocolVersion, stable, modified)
	require.NoError(t, err)

	got := schema.Drift(p, servedBy(t, fullServer(t), p), api.Unserved)
	want := []string{
		"client request thread/frobnicate of the " + api.ProtocolVersion + " schema is neither served nor listed in api.Unserved with a reason",
		"server notification thread/frobnicated of the " + api.ProtocolVersion + " schema is neither served nor listed in api.Unserved with a reason",
	}
	require.Equal(t, want, got)
}

package orchestrate

import (
	"testing"

	"github.com/appserver/appserver/api"
	"github.com/appserver/appserver/internal/dynamic"
	"github.com/appserver/appserver/internal/policy"
	"github.com/appserver/appserver/internal/registry"
	"github.com/appserver/appserver/internal/turns"
)

// BenchmarkBuildTools measures what every turn pays for its tool set with
// the default configuration: Build (the registry and the offered specs)
// and the specs' JSON, which the turn's first model request takes from
// registry.EncodeSpec.
//
//	go test -run '^$' -bench BuildTools -benchmem ./internal/tools/orchestrate/
func BenchmarkBuildTools(b *testing.B) {
	s, err := New(Config{Now: newTestClock().Now}, nil, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	client := &fakeClient{raised: map[api.ThreadActiveFlag]int{}}
	tc := turns.ToolContext{
		ThreadID: "thread-1", TurnID: "turn-1", Cwd: b.TempDir(),
		Sink:           &fakeSink{client: client, changed: make(chan struct{}, 1)},
		ApprovalPolicy: api.AskForApproval{Policy: "on-request"},
		Sandbox:        api.SandboxPolicy{Type: api.SandboxPolicyWorkspaceWrite},
		Approvals:      policy.NewSessionApprovals(), Client: client,
	}
	b.Run("build", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := s.Build(tc); err != nil {
				b.Fatal(err)
			}
		}
	})
	// A thread with ten dynamic tools: what restoring them from the
	// thread's record costs (every turn did it before restoredTools), and
	// what such a turn's Build costs now.
	dyn := dynamicToolsJSON(b, "edit", 10)
	b.Run("restore-dynamic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := dynamic.Restore(dyn, dynamic.Options{Builtins: builtinToolNames}); err != nil {
				b.Fatal(err)
			}
		}
	})
	broker := dynamic.NewBroker(dynamic.BrokerConfig{})
	defer broker.Close()
	withBroker, err := New(Config{Now: newTestClock().Now}, broker, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer withBroker.Close()
	dtc := tc
	dtc.DynamicTools = dyn
	b.Run("build-dynamic", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, _, err := withBroker.Build(dtc); err != nil {
				b.Fatal(err)
			}
		}
	})
	specs, _, err := s.Build(tc)
	if err != nil {
		b.Fatal(err)
	}
	b.Run("encode", func(b *testing.B) {
		b.ReportAllocs()
		n := 0
		for b.Loop() {
			n = 0
			for _, sp := range specs {
				raw, err := registry.EncodeSpec(sp.Spec)
				if err != nil {
					b.Fatal(err)
				}
				n += len(raw)
			}
		}
		b.ReportMetric(float64(len(specs)), "specs")
		b.ReportMetric(float64(n), "bytes")
	})
}

package server_test

import (
	"testing"

	"github.com/appserver/appserver/internal/apptest"
)

// pluginDifferences are the requests of plugins.jsonl appserver answers
// otherwise than the reference, with its answer: the reference installs a
// local marketplace's plugin even with plugins off (or says its file is
// missing); appserver has no plugins and touches no file for it.
var pluginDifferences = map[string]string{
	`"plugin/install" {"pluginName":"x","marketplacePath":"/nonexistent/.agents/plugins/marketplace.json"}`: "plugins feature is disabled",
}

// The plugin/* methods answer as the reference does with plugins off
// (testdata/golden/reference/plugins.jsonl, see plugins_capture.js): the
// same results, the same refusals of bad params, the same gating of the
// experimental plugin/search.
func TestPluginMethodsMatchReference(t *testing.T) {
	calls := readGoldenCalls(t, "plugins.jsonl")
	d := apptest.Start(t, "--data-dir", t.TempDir())
	conns := map[bool]*apptest.Client{true: rpcOf(t, d, true), false: rpcOf(t, d, false)}
	for _, c := range calls {
		got := sendGolden(conns[*c.Exp], c)
		if msg, ok := pluginDifferences[c.String()]; ok {
			requireErrorMessage(t, c, got, msg)
			continue
		}
		requireAnswerMatches(t, c, got)
	}
}

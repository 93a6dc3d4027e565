// Capture of plugins.jsonl: codex-cli 0.171.0 `codex app-server --listen
// ws://127.0.0.1:PORT` with a fresh CODEX_HOME whose config.toml sets a
// custom provider "fake" and `[features] plugins = false`, signed in with
// an API key (OPENAI_API_KEY), HOME an empty directory. Each line is one
// request of CALLS and the reference's answer (result or error); "exp"
// says whether the connection initialized with
// capabilities.experimentalApi. No path named exists on the machine.
// internal/server/plugins_e2e_test.go replays the same requests.
// Usage: node plugins_capture.js ws://127.0.0.1:PORT > plugins.jsonl
const WebSocket = require('ws');
const M = '/nonexistent/.agents/plugins/marketplace.json';
const CALLS = [
  ['plugin/list', {}],
  ['plugin/list', { cwds: ['/nonexistent/project'], forceRefetch: true, marketplaceKinds: ['local', 'workspace-directory'] }],
  ['plugin/list', { cwds: null, marketplaceKinds: null }],
  ['plugin/list', { marketplaceKinds: ['remote'] }],
  ['plugin/list', { cwds: ['relative/dir'] }],
  ['plugin/list', null],
  ['plugin/installed', {}],
  ['plugin/installed', { cwds: ['/nonexistent/project'], installSuggestionPluginNames: ['x'] }],
  ['plugin/installed', { cwds: ['relative/dir'] }],
  ['plugin/read', {}],
  ['plugin/read', { pluginName: 'x' }],
  ['plugin/read', { pluginName: 'x', marketplacePath: M, remoteMarketplaceName: 'm' }],
  ['plugin/read', { pluginName: 'x', marketplacePath: M }],
  ['plugin/read', { pluginName: 'x', marketplacePath: 'relative/marketplace.json' }],
  ['plugin/read', { pluginName: 'x', remoteMarketplaceName: 'openai-curated' }],
  ['plugin/install', {}],
  ['plugin/install', { pluginName: 'x' }],
  ['plugin/install', { pluginName: 'x', marketplacePath: M, remoteMarketplaceName: 'm' }],
  ['plugin/install', { pluginName: 'x', marketplacePath: M }],
  ['plugin/install', { pluginName: 'x', marketplacePath: 'relative/marketplace.json' }],
  ['plugin/install', { pluginName: '../x', remoteMarketplaceName: 'openai-curated' }],
  ['plugin/uninstall', {}],
  ['plugin/uninstall', { pluginId: 'x@m' }],
  ['plugin/uninstall', { pluginId: 'a.b.c@m_N-1' }],
  ['plugin/uninstall', { pluginId: '-x@_m' }],
  ['plugin/uninstall', { pluginId: 'x' }],
  ['plugin/uninstall', { pluginId: 'x~y' }],
  ['plugin/uninstall', { pluginId: '' }],
  ['plugin/uninstall', { pluginId: '../../etc@y' }],
  ['plugin/uninstall', { pluginId: 'x@m.n' }],
  ['plugin/uninstall', { pluginId: '.x@m' }],
  ['plugin/uninstall', { pluginId: 'x.@m' }],
  ['plugin/uninstall', { pluginId: 'a..b@m' }],
  ['plugin/uninstall', { pluginId: '@m' }],
  ['plugin/uninstall', { pluginId: 'x@' }],
  ['plugin/uninstall', { pluginId: 'a@b@c' }],
  ['plugin/uninstall', { pluginId: 'x~y@m' }],
  ['plugin/uninstall', { pluginId: 'x y@m' }],
  ['plugin/uninstall', { pluginId: '\u00e9@m' }],
  ['plugin/reconcile', {}],
  ['plugin/reconcile', { reason: 'startup' }],
  ['plugin/reconcile', null],
  ['plugin/search', {}],
  ['plugin/search', { searchTerm: 'x' }],
  ['plugin/search', { searchTerm: 'x', cwds: ['/nonexistent/project'], scope: 'workspace', limit: 5, cursor: 'zz' }],
  ['plugin/search', { searchTerm: 'x', scope: 'installed' }],
  ['plugin/search', { searchTerm: 'x', cwds: ['relative/dir'] }],
  ['plugin/skill/read', { remoteMarketplaceName: 'a' }],
  ['plugin/skill/read', { remoteMarketplaceName: 'openai-curated', remotePluginId: 'b', skillName: 'c' }],
  ['plugin/share/list', {}],
  ['plugin/share/list', null],
  ['plugin/share/save', {}],
  ['plugin/share/save', { pluginPath: 'relative/plugin' }],
  ['plugin/share/save', { pluginPath: '/nonexistent/plugin' }],
  ['plugin/share/checkout', {}],
  ['plugin/share/checkout', { remotePluginId: 'x' }],
  ['plugin/share/delete', {}],
  ['plugin/share/delete', { remotePluginId: 'x' }],
  ['plugin/share/updateTargets', { remotePluginId: 'x' }],
  ['plugin/share/updateTargets', { remotePluginId: 'x', discoverability: 'BAD', shareTargets: [] }],
  ['plugin/share/updateTargets', { remotePluginId: 'x', discoverability: 'UNLISTED', shareTargets: [] }],
];
// Asked again without the experimental capability.
const STABLE_CALLS = [
  ['plugin/search', { searchTerm: 'x' }],
  ['plugin/list', {}],
  ['plugin/uninstall', { pluginId: 'x@m' }],
];

function session(url, exp) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url);
    let id = 0;
    const pending = {};
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString());
      if (f.id !== undefined && pending[f.id]) { pending[f.id](f); delete pending[f.id]; }
    });
    const call = (method, params) => new Promise((r) => {
      const i = ++id;
      pending[i] = r;
      const frame = { id: i, method };
      if (params !== null) frame.params = params;
      ws.send(JSON.stringify(frame));
    });
    ws.on('open', async () => {
      await call('initialize', { clientInfo: { name: 'probe', title: null, version: '0' }, capabilities: { experimentalApi: exp } });
      ws.send(JSON.stringify({ method: 'initialized' }));
      resolve({ ws, call });
    });
  });
}

(async () => {
  const url = process.argv[2];
  for (const [exp, calls] of [[true, CALLS], [false, STABLE_CALLS]]) {
    const s = await session(url, exp);
    for (const c of calls) {
      const r = await s.call(c[0], c[1]);
      console.log(JSON.stringify({ exp, req: c, res: r.result ?? null, err: r.error ?? null }));
    }
    s.ws.close();
  }
  process.exit(0);
})();

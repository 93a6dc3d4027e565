// Capture of features.jsonl: codex-cli 0.171.0 `codex app-server --listen
// ws://127.0.0.1:PORT` with a fresh CODEX_HOME whose config.toml sets a
// custom provider "fake" and trusts the project directory, signed in with
// an API key (OPENAI_API_KEY), HOME an empty directory. Each line is one
// request of CALLS and the reference's answer (result or error); "exp"
// says whether the connection initialized with
// capabilities.experimentalApi. A thread is started with feature switches
// in its config (dotted keys), another with a features table (the
// reference merges the two forms in an unspecified order when one config
// holds both), and "$THREAD" in a later request stands for the last one's
// id.
// The project's path is given on the command line and kept out of the
// file (its requests say CWD).
// internal/server/features_e2e_test.go replays the same requests.
// Usage: node features_capture.js ws://127.0.0.1:PORT CWD > features.jsonl
const WebSocket = require('ws');
const CALLS = [
  ['experimentalFeature/list', {}],
  ['experimentalFeature/list', { limit: 2 }],
  ['experimentalFeature/list', { limit: 2, cursor: '2' }],
  ['experimentalFeature/list', { limit: 0 }],
  ['experimentalFeature/list', { cursor: 'abc' }],
  ['experimentalFeature/list', { cursor: '-1' }],
  ['experimentalFeature/list', { cursor: '100000' }],
  ['experimentalFeature/list', { threadId: 'nope' }],
  ['experimentalFeature/list', { threadId: '00000000-0000-0000-0000-000000000000' }],
  ['experimentalFeature/list', null],
  ['thread/start', { cwd: 'CWD', config: { 'features.shell_tool': false, 'features.goals': false } }],
  ['experimentalFeature/list', { threadId: '$THREAD' }],
  ['thread/start', { cwd: 'CWD', config: { features: { view_image: false, unified_exec: false } } }],
  ['experimentalFeature/list', { threadId: '$THREAD' }],
  ['experimentalFeature/enablement/set', {}],
  ['experimentalFeature/enablement/set', { enablement: {} }],
  ['experimentalFeature/enablement/set', { enablement: { goals: 'yes' } }],
  ['experimentalFeature/enablement/set', { enablement: { bogus: true } }],
  ['experimentalFeature/enablement/set', { enablement: { network_proxy: true, apps: false } }],
  ['experimentalFeature/enablement/set', { enablement: { goals: false } }],
  ['experimentalFeature/enablement/set', null],
];
// Asked again without the experimental capability.
const STABLE_CALLS = [
  ['experimentalFeature/list', { limit: 1 }],
  ['experimentalFeature/enablement/set', { enablement: {} }],
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
  const [url, cwd] = process.argv.slice(2);
  let thread = '';
  for (const [exp, calls] of [[true, CALLS], [false, STABLE_CALLS]]) {
    const s = await session(url, exp);
    for (const c of calls) {
      const params = JSON.parse(JSON.stringify(c[1]).replace('"CWD"', JSON.stringify(cwd)).replace('$THREAD', thread));
      const r = await s.call(c[0], params);
      let res = r.result ?? null;
      if (c[0] === 'thread/start' && res) {
        thread = res.thread.id;
        res = null; // the thread's shape is not what this capture is about
      }
      console.log(JSON.stringify({ exp, req: c, res, err: r.error ?? null }));
    }
    s.ws.close();
  }
  process.exit(0);
})();

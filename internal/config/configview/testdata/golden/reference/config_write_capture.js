// Capture of config_write_errors.jsonl: codex-cli 0.171.0 `codex app-server
// --listen ws://127.0.0.1:PORT` with a fresh CODEX_HOME whose config.toml
// sets model "gpt-5.5" and a custom provider "fake"; each line is one
// request of CALLS and the reference's answer (result or error), with the
// CODEX_HOME path replaced by $CODEX_HOME. The reference refuses bad values,
// another filePath and a stale expectedVersion with -32600 and
// data.config_write_error_code, and accepts any key (the operator's
// included) and a NUL in a string.
// Usage: node config_write_capture.js ws://127.0.0.1:PORT > out.jsonl
const WebSocket = require('ws');
const CALLS = [
  ['config/value/write', { keyPath: 'approval_policy', value: 'sometimes', mergeStrategy: 'replace' }],
  ['config/value/write', { keyPath: 'model', value: 5, mergeStrategy: 'replace' }],
  ['config/batchWrite', { edits: [{ keyPath: 'model', value: 'gpt-5.5', mergeStrategy: 'replace' }, { keyPath: 'sandbox_mode', value: 'bad', mergeStrategy: 'replace' }] }],
  ['config/value/write', { keyPath: 'model', value: 'gpt-5.5', mergeStrategy: 'replace', filePath: '/etc/x.toml' }],
  ['config/value/write', { keyPath: 'model', value: 'gpt-5.5', mergeStrategy: 'replace', expectedVersion: 'sha256:00' }],
  ['config/value/write', { keyPath: 'a..b', value: 'x', mergeStrategy: 'replace' }],
  ['config/value/write', { keyPath: 'http_api.principal_max_sandbox', value: 'danger-full-access', mergeStrategy: 'replace' }],
  ['config/value/write', { keyPath: 'mcp_servers.x.command', value: '/bin/true', mergeStrategy: 'replace' }],
  ['config/value/write', { keyPath: 'model', value: 'a\u0000b', mergeStrategy: 'replace' }],
];
const ws = new WebSocket(process.argv[2]);
let id = 0;
const pending = {};
ws.on('message', (d) => {
  const f = JSON.parse(d.toString());
  if (f.id !== undefined && pending[f.id]) { pending[f.id](f); delete pending[f.id]; }
});
const call = (method, params) => new Promise((r) => { const i = ++id; pending[i] = r; ws.send(JSON.stringify({ id: i, method, params })); });
ws.on('open', async () => {
  await call('initialize', { clientInfo: { name: 'probe', title: null, version: '0' }, capabilities: { experimentalApi: true } });
  ws.send(JSON.stringify({ method: 'initialized' }));
  for (const c of CALLS) {
    const r = await call(c[0], c[1]);
    console.log(JSON.stringify({ req: c, res: r.result ?? null, err: r.error ?? null }));
  }
  ws.close();
});

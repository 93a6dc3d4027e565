// Capture of config_same_value.jsonl: codex-cli 0.171.0 `codex app-server
// -c model="fake-model" --listen ws://127.0.0.1:PORT` with a fresh
// CODEX_HOME whose config.toml names a custom provider "fake" (no model is
// called). The client saves the very model the -c flag sets (as /model
// does when the user keeps the current model), then a different one: a
// write is overridden only when the effective value differs from the one
// written. Paths were then rewritten to /home/dev/.codex (CODEX_HOME).
// Usage: node config_same_value_capture.js ws://127.0.0.1:PORT config_same_value.jsonl
const WebSocket = require('ws');
const fs = require('fs');
const [url, outFile] = process.argv.slice(2);
const out = fs.createWriteStream(outFile);
const edit = (keyPath, value) => ({ keyPath, value, mergeStrategy: 'replace' });
const CALLS = [
  ['config/batchWrite', { edits: [edit('model', 'fake-model'), edit('model_reasoning_effort', 'high')], filePath: null, expectedVersion: null }],
  ['config/value/write', edit('model', 'fake-model')],
  ['config/value/write', edit('model', 'other-model')],
  ['config/batchWrite', { edits: [edit('model_reasoning_effort', 'low'), edit('model', 'fake-model')], filePath: null, expectedVersion: null }],
];
const ws = new WebSocket(url);
let id = 0;
const pending = {};
ws.on('message', (d) => {
  const f = JSON.parse(d.toString());
  if (f.id !== undefined && pending[f.id]) { pending[f.id](f); delete pending[f.id]; }
});
const call = (method, params) => new Promise((r) => { const i = ++id; pending[i] = r; ws.send(JSON.stringify({ id: i, method, params })); });
ws.on('open', async () => {
  await call('initialize', { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } });
  ws.send(JSON.stringify({ method: 'initialized' }));
  for (const [method, params] of CALLS) {
    const f = await call(method, params);
    out.write(JSON.stringify({ method, params, answer: f.error ? { error: f.error } : { result: f.result } }) + '\n');
  }
  out.end(() => process.exit(0));
});

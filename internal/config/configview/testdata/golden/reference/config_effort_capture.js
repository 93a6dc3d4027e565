// Capture of config_effort.jsonl: codex-cli 0.171.0 `codex app-server
// -c model="fake-model" --listen ws://127.0.0.1:PORT` with a fresh
// CODEX_HOME whose config.toml names a custom provider "fake" (no model is
// called). As the TUI's /model does, the client saves a model and its
// reasoning effort with config/batchWrite while the -c flag sets the
// model, then writes each key alone, then starts a thread, which takes the
// saved effort (and summary and verbosity), and reads the config back.
// Each line is one request and the reference's answer; paths were then
// rewritten to /home/dev/project (cwd) and /home/dev/.codex (CODEX_HOME).
// Usage: node config_effort_capture.js ws://127.0.0.1:PORT CWD config_effort.jsonl
const WebSocket = require('ws');
const fs = require('fs');
const [url, cwd, outFile] = process.argv.slice(2);
const out = fs.createWriteStream(outFile);
const edit = (keyPath, value) => ({ keyPath, value, mergeStrategy: 'replace' });
const CALLS = [
  ['config/batchWrite', { edits: [edit('model', 'other-model'), edit('model_reasoning_effort', 'high')], filePath: null, expectedVersion: null }],
  ['config/batchWrite', { edits: [edit('model_reasoning_effort', 'low')], filePath: null, expectedVersion: null }],
  ['config/value/write', edit('model', 'other-model')],
  ['config/value/write', edit('model_reasoning_effort', 'medium')],
  ['config/value/write', edit('model_reasoning_summary', 'concise')],
  ['config/value/write', edit('model_verbosity', 'low')],
  ['config/value/write', edit('service_tier', 'fast')],
  ['thread/start', { cwd }],
  ['config/read', { includeLayers: false, cwd }],
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

// Capture of fs_calls.jsonl and fuzzy_calls.jsonl: codex-cli 0.171.0
// `codex app-server --listen ws://127.0.0.1:PORT` with a fresh CODEX_HOME
// (a config.toml naming a custom provider; no model is called). The
// script (fs_script.json, fuzzy_script.json) lists a tree, made under an
// empty directory ROOT before the run, and steps: a request ("call"), a
// pause ("sleep", ms), and changes the script makes itself ("write",
// "rm"). Each request is printed with its answer (result or error), each
// fs/changed and fuzzyFileSearch/* notification as it comes, with ROOT
// written $ROOT. The connection initializes with experimentalApi.
// Usage: node files_capture.js ws://127.0.0.1:PORT SCRIPT.json ROOT > out.jsonl
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const WebSocket = require('ws');
const script = JSON.parse(fs.readFileSync(process.argv[3]));
const root = process.argv[4];
for (const [kind, rel, arg, mode] of script.tree) {
  const p = path.join(root, rel);
  fs.mkdirSync(kind === 'dir' ? p : path.dirname(p), { recursive: true });
  if (kind === 'file') fs.writeFileSync(p, arg, { mode: mode ? parseInt(mode, 8) : 0o644 });
  if (kind === 'symlink') fs.symlinkSync(arg, p);
  if (kind === 'fifo') execFileSync('mkfifo', [p]);
}
const fill = (v) => JSON.parse(JSON.stringify(v).split('$ROOT').join(root));
const show = (v) => JSON.parse(JSON.stringify(v).split(root).join('$ROOT'));
const kept = (m) => m === 'fs/changed' || m.startsWith('fuzzyFileSearch/');
const ws = new WebSocket(process.argv[2]);
let id = 0;
const pending = {};
ws.on('message', (d) => {
  const f = JSON.parse(d.toString());
  if (f.id !== undefined && pending[f.id]) { pending[f.id](f); delete pending[f.id]; return; }
  if (f.method && kept(f.method)) console.log(JSON.stringify({ note: show({ method: f.method, params: f.params }) }));
});
const call = (method, params) => new Promise((r) => { const i = ++id; pending[i] = r; ws.send(JSON.stringify({ id: i, method, params })); });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
ws.on('open', async () => {
  await call('initialize', { clientInfo: { name: 'probe', title: null, version: '0' }, capabilities: { experimentalApi: true } });
  ws.send(JSON.stringify({ method: 'initialized' }));
  for (const step of script.steps) {
    const [kind, a, b] = step;
    if (kind === 'sleep') { await sleep(a); continue; }
    if (kind === 'write') { fs.writeFileSync(path.join(root, a), b); continue; }
    if (kind === 'rm') { fs.rmSync(path.join(root, a), { recursive: true }); continue; }
    const r = await call(a, fill(b));
    console.log(JSON.stringify({ req: [a, b], res: show(r.result ?? null), err: show(r.error ?? null) }));
  }
  ws.close();
});

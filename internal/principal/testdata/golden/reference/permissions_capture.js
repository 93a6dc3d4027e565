// Capture of permissions.jsonl: codex-cli 0.171.0 `codex app-server --listen
// ws://127.0.0.1:PORT` with approval_policy = "never", sandbox_mode =
// "workspace-write", the project trusted, model "fake-model" and
// model_provider "fake" = the small Responses server below, which answers a
// turn's first request with one shell call (`touch made.txt`), then "done".
// (In the capture environment the reference's own sandbox helper was
// missing, so its touch failed to start rather than being denied; the
// touch turn is in the file for the frames' shapes only.) The client
// lists the permission profiles, starts threads with each built-in
// `permissions` id, an unknown one, a user-defined one and one together
// with `sandbox`, runs the touch turn on the `:read-only` thread, then
// resumes and forks it with `permissions` and sends turn/start with an
// unknown id and with `permissions` and `sandboxPolicy` together.
// Paths were then rewritten to /home/dev/project (cwd) and /home/dev/.codex
// (CODEX_HOME), as in the other captures.
// Usage: node permissions_capture.js ws://127.0.0.1:PORT MODELPORT CWD permissions.jsonl
const http = require('http');
const WebSocket = require('ws');
const fs = require('fs');
const [url, modelPort, cwd, outFile] = process.argv.slice(2);

let n = 0;
function sse(res, items) {
  n++;
  const id = `resp_${n}`;
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const send = (type, body) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`);
  send('response.created', { response: { id } });
  items.forEach((item, i) => {
    send('response.output_item.added', { output_index: i, item });
    send('response.output_item.done', { output_index: i, item });
  });
  send('response.completed', { response: { id, usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 } } });
  res.end();
}
const model = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    let b = {};
    try { b = JSON.parse(body); } catch (e) { /* a non-JSON probe */ }
    if (!req.url.endsWith('/responses')) { res.writeHead(404); res.end(); return; }
    const input = b.input || [];
    const last = input[input.length - 1] || {};
    if (last.type === 'function_call_output') {
      return sse(res, [{ type: 'message', role: 'assistant', id: 'msg_2', content: [{ type: 'output_text', text: 'done', annotations: [] }] }]);
    }
    const tools = (b.tools || []).map((t) => t.name || t.type);
    const name = tools.includes('shell_command') ? 'shell_command' : 'exec_command';
    const args = name === 'shell_command' ? { command: 'touch made.txt' } : { cmd: 'touch made.txt' };
    return sse(res, [{ type: 'function_call', id: 'fc_1', call_id: 'call_touch', name, arguments: JSON.stringify(args) }]);
  });
});
model.listen(Number(modelPort), '127.0.0.1');

const out = fs.createWriteStream(outFile);
const log = (dir, frame) => out.write(JSON.stringify({ dir, frame }) + '\n');
const pending = {};
const notes = [];
let id = 0;
function call(ws, method, params) {
  return new Promise((resolve) => {
    const f = { id: ++id, method, params };
    pending[f.id] = resolve;
    log('send', f);
    ws.send(JSON.stringify(f));
  });
}
async function note(pred, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const i = notes.findIndex(pred);
    if (i >= 0) return notes.splice(i, 1)[0];
    await new Promise((r) => setTimeout(r, 50));
  }
  return null;
}
setTimeout(() => {
  const ws = new WebSocket(url);
  ws.on('message', (data) => {
    const f = JSON.parse(data.toString('utf8'));
    log('recv', f);
    if (f.id !== undefined && pending[f.id]) {
      pending[f.id](f);
      delete pending[f.id];
    } else if (f.method) {
      notes.push(f);
    }
  });
  ws.on('open', async () => {
    await call(ws, 'initialize', { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } });
    ws.send(JSON.stringify({ method: 'initialized' }));
    await call(ws, 'permissionProfile/list', {});
    const ro = await call(ws, 'thread/start', { cwd, permissions: ':read-only', sandbox: null });
    await call(ws, 'thread/start', { cwd, permissions: ':workspace' });
    await call(ws, 'thread/start', { cwd, permissions: ':danger-full-access' });
    await call(ws, 'thread/start', { cwd, permissions: ':bogus' });
    await call(ws, 'thread/start', { cwd, permissions: 'custom' });
    await call(ws, 'thread/start', { cwd, permissions: ':read-only', sandbox: 'workspace-write' });
    await call(ws, 'thread/start', { cwd });
    const tid = ro.result.thread.id;
    await call(ws, 'turn/start', { threadId: tid, input: [{ type: 'text', text: 'touch it', text_elements: [] }] });
    await note((f) => f.method === 'turn/completed', 30000);
    await call(ws, 'thread/resume', { threadId: tid, permissions: ':workspace' });
    await call(ws, 'thread/fork', { threadId: tid, permissions: ':read-only' });
    await call(ws, 'turn/start', { threadId: tid, input: [{ type: 'text', text: 'hi', text_elements: [] }], permissions: ':bogus' });
    await call(ws, 'turn/start', { threadId: tid, input: [{ type: 'text', text: 'hi', text_elements: [] }], permissions: ':read-only', sandboxPolicy: { type: 'readOnly' } });
    await new Promise((r) => setTimeout(r, 1000));
    ws.close();
    out.end();
    model.close();
    process.exit(0);
  });
}, 500);

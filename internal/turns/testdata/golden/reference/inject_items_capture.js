// Capture of inject_items.jsonl: codex-cli 0.171.0 `codex app-server --listen
// ws://127.0.0.1:PORT` with approval_policy = "never", model "fake-model"
// and model_provider "fake" = the small Responses server below, which
// answers every request with the message "ok" (the second request of the
// "slow" turn after a delay, so that items can be injected while it runs)
// and logs each request's `input` as a {"dir":"model"} line. The client
// sends thread/inject_items with an unknown thread, a malformed thread id,
// no items, an item that is not a Responses item, a user and an assistant
// message (idle thread), then starts a turn, injects during a running
// turn, and reads the thread back.
// Paths were then rewritten to /home/dev/project (cwd) and /home/dev/.codex
// (CODEX_HOME), as in the other captures.
// Usage: node inject_items_capture.js ws://127.0.0.1:PORT MODELPORT CWD inject_items.jsonl
const http = require('http');
const WebSocket = require('ws');
const fs = require('fs');
const [url, modelPort, cwd, outFile] = process.argv.slice(2);
const out = fs.createWriteStream(outFile);
const log = (dir, frame) => out.write(JSON.stringify({ dir, frame }) + '\n');

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
    log('model', { input: withoutPrompts(input) });
    const text = JSON.stringify(input);
    const answer = () => sse(res, [{ type: 'message', role: 'assistant', id: `msg_${n + 1}`, content: [{ type: 'output_text', text: 'ok', annotations: [] }] }]);
    if (text.includes('slow') && !text.includes('during')) return setTimeout(answer, 1500);
    return answer();
  });
});
model.listen(Number(modelPort), '127.0.0.1');

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
const msg = (role, text) => ({ type: 'message', role, content: [{ type: role === 'assistant' ? 'output_text' : 'input_text', text }] });
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
    const st = await call(ws, 'thread/start', { cwd, approvalPolicy: 'never' });
    const tid = st.result.thread.id;
    await call(ws, 'thread/inject_items', { threadId: '00000000-0000-7000-8000-000000000000', items: [msg('user', 'x')] });
    await call(ws, 'thread/inject_items', { threadId: 'nope', items: [msg('user', 'x')] });
    await call(ws, 'thread/inject_items', { threadId: tid, items: [] });
    await call(ws, 'thread/inject_items', { threadId: tid, items: [{ type: 'bogus' }] });
    await call(ws, 'thread/inject_items', { threadId: tid, items: [msg('user', 'fine'), 42] });
    await call(ws, 'thread/inject_items', { threadId: tid, items: [msg('user', 'nul \u0000 here')] });
    await call(ws, 'thread/inject_items', { threadId: tid, items: [msg('user', 'side note one'), msg('assistant', 'side answer one')] });
    await new Promise((r) => setTimeout(r, 300));
    await call(ws, 'turn/start', { threadId: tid, input: [{ type: 'text', text: 'first turn', text_elements: [] }] });
    await note((f) => f.method === 'turn/completed', 30000);
    await call(ws, 'turn/start', { threadId: tid, input: [{ type: 'text', text: 'slow turn', text_elements: [] }] });
    await note((f) => f.method === 'turn/started', 10000);
    await new Promise((r) => setTimeout(r, 300));
    await call(ws, 'thread/inject_items', { threadId: tid, items: [msg('user', 'injected during')] });
    await note((f) => f.method === 'turn/completed', 30000);
    await call(ws, 'turn/start', { threadId: tid, input: [{ type: 'text', text: 'third turn', text_elements: [] }] });
    await note((f) => f.method === 'turn/completed', 30000);
    await call(ws, 'thread/read', { threadId: tid, includeTurns: true });
    await new Promise((r) => setTimeout(r, 500));
    ws.close();
    out.end();
    model.close();
    process.exit(0);
  });
}, 500);

// The reference's prompts (its developer messages and tool descriptions)
// are its own words: the capture leaves them out; the tests compare names,
// shapes and outputs.
function withoutPrompts(x, inTools = false) {
  if (Array.isArray(x)) return x.map((e) => withoutPrompts(e, inTools));
  if (x === null || typeof x !== 'object') return x;
  const out = {};
  for (const [k, v] of Object.entries(x)) {
    if (inTools && k === 'description' && typeof v === 'string') continue;
    out[k] = withoutPrompts(v, inTools || ['tools', 'tool_search', 'collaboration_tools', 'multi_agent_v1_tools'].includes(k));
  }
  if ((out.role === 'developer' || out.role === 'system') && Array.isArray(out.content)) {
    out.content = out.content.map((c) => ('text' in c ? { ...c, text: "[the reference's developer text, left out of this capture]" } : c));
  }
  return out;
}

// Capture of threadlist.jsonl (and threadlist_default.jsonl): codex-cli
// 0.171.0 `codex app-server --listen ws://127.0.0.1:PORT` with model
// "fake-model" and model_provider "fake" = the small Responses server
// below, which answers every request with "ok". threadlist.jsonl: the
// config also sets approval_policy = "never", sandbox_mode =
// "workspace-write" and trusts the project; threadlist_default.jsonl: it
// sets neither (the default sandbox, the project untrusted). One client
// (experimentalApi) starts threads that never get a user message (one
// plain, one named with thread/name/set, one that only ran a `!cmd`
// through thread/shellCommand), one with a turn, an ephemeral one with a
// turn and one started with `permissions: ":read-only"` with a turn; then
// lists the threads (no params, every source kind, the indexed metadata
// only, the ids named), reads a loaded thread, forks the read-only thread
// without and with `permissions`, forks the threads without a user
// message, resumes the read-only one, lists again (also by source kind,
// parent and ancestor), unsubscribes the thread with a turn until it is
// closed and reads and lists it unloaded.
// Paths were then rewritten to /home/dev/project (cwd) and
// /home/dev/.codex (CODEX_HOME), as in the other captures.
// Usage: node threadlist_capture.js ws://127.0.0.1:PORT MODELPORT CWD threadlist.jsonl
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
  req.on('data', () => {});
  req.on('end', () => {
    if (!req.url.endsWith('/responses')) { res.writeHead(404); res.end(); return; }
    return sse(res, [{ type: 'message', role: 'assistant', id: 'msg_1', content: [{ type: 'output_text', text: 'ok', annotations: [] }] }]);
  });
});
model.listen(Number(modelPort), '127.0.0.1');

const pending = {};
const notes = [];
let id = 0;
let ws;
function call(method, params) {
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
const pause = (ms) => new Promise((r) => setTimeout(r, ms));
const text = (t) => [{ type: 'text', text: t, text_elements: [] }];
async function turn(threadId, t) {
  await call('turn/start', { threadId, input: text(t) });
  await note((f) => f.method === 'turn/completed' && f.params.threadId === threadId, 30000);
}

setTimeout(() => {
  ws = new WebSocket(url);
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
    await call('initialize', { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } });
    ws.send(JSON.stringify({ method: 'initialized' }));
    const plain = (await call('thread/start', { cwd })).result.thread.id;
    const ro = (await call('thread/start', { cwd, permissions: ':read-only' })).result.thread.id;
    const named = (await call('thread/start', { cwd })).result.thread.id;
    await call('thread/name/set', { threadId: named, name: 'named only' });
    const used = (await call('thread/start', { cwd })).result.thread.id;
    await turn(used, 'hello');
    const eph = (await call('thread/start', { cwd, ephemeral: true })).result.thread.id;
    await turn(eph, 'ephemeral');
    await turn(ro, 'read only');
    const shell = (await call('thread/start', { cwd })).result.thread.id;
    await call('thread/shellCommand', { threadId: shell, command: 'true' });
    await note((f) => f.method === 'turn/completed' && f.params.threadId === shell, 30000);
    await pause(500);
    await call('thread/list', {});
    await call('thread/list', { sourceKinds: ['cli', 'vscode', 'exec', 'appServer', 'subAgent', 'subAgentReview', 'subAgentCompact', 'subAgentThreadSpawn', 'subAgentOther', 'unknown'] });
    await call('thread/list', { useStateDbOnly: true });
    await call('thread/list', { includedThreadIds: [plain, ro, named, used, eph, shell] });
    await call('thread/loaded/list', {});
    await call('thread/read', { threadId: plain });
    await call('thread/read', { threadId: used });
    await call('thread/fork', { threadId: ro });
    await call('thread/fork', { threadId: ro, permissions: ':workspace' });
    await call('thread/fork', { threadId: plain });
    await call('thread/fork', { threadId: named });
    await call('thread/fork', { threadId: shell });
    await call('thread/resume', { threadId: ro });
    await call('thread/list', {});
    await call('thread/list', { sourceKinds: ['subAgentThreadSpawn'] });
    await call('thread/list', { sourceKinds: ['cli'] });
    await call('thread/list', { sourceKinds: ['vscode', 'subAgent'] });
    await call('thread/list', { ancestorThreadId: ro });
    await call('thread/list', { parentThreadId: ro, sourceKinds: ['subAgentThreadSpawn'] });
    await call('thread/list', { ancestorThreadId: '00000000-0000-7000-8000-000000000000', limit: 1, sourceKinds: ['subAgentThreadSpawn'], useStateDbOnly: true });
    await call('thread/unsubscribe', { threadId: used });
    await note((f) => f.method === 'thread/closed' && f.params.threadId === used, 10000);
    await call('thread/read', { threadId: used });
    await call('thread/list', { includedThreadIds: [used] });
    await pause(700);
    ws.close();
    out.end();
    model.close();
    process.exit(0);
  });
}, 500);

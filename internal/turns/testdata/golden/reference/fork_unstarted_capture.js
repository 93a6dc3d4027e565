// Capture of fork_unstarted.jsonl: codex-cli 0.171.0 `codex app-server
// --listen ws://127.0.0.1:PORT` with model "fake-model" and model_provider
// "fake" = the small Responses server below, which answers "ok" except to
// a request whose input holds "HANG-MODEL", which it never answers. One
// client (experimentalApi) starts threads and leaves each in one state:
// only started, only named (thread/name/set), only given a `!cmd`
// (thread/shellCommand), ephemeral and only started, ephemeral with a
// turn, one whose only turn was interrupted as soon as it started, one
// whose turn was interrupted before the model answered, and one with a
// finished turn; then forks each of them (the plain one also as an
// ephemeral copy) and an id no thread has.
// Paths were then rewritten to /home/dev/project (cwd), as in the other
// captures.
// Usage: node fork_unstarted_capture.js ws://127.0.0.1:PORT MODELPORT CWD fork_unstarted.jsonl
const http = require('http');
const WebSocket = require('ws');
const fs = require('fs');
const [url, modelPort, cwd, outFile] = process.argv.slice(2);

const out = fs.createWriteStream(outFile);
const log = (dir, frame) => out.write(JSON.stringify({ dir, frame }) + '\n');

let n = 0;
const hanging = [];
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
  req.on('data', (d) => { body += d; });
  req.on('end', () => {
    if (!req.url.endsWith('/responses')) { res.writeHead(404); res.end(); return; }
    if (body.includes('HANG-MODEL')) { hanging.push(res); return; }
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
const completed = (tid) => (f) => f.method === 'turn/completed' && f.params.threadId === tid;
async function turn(threadId, t) {
  await call('turn/start', { threadId, input: text(t) });
  await note(completed(threadId), 30000);
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
    const named = (await call('thread/start', { cwd })).result.thread.id;
    await call('thread/name/set', { threadId: named, name: 'named only' });
    const shell = (await call('thread/start', { cwd })).result.thread.id;
    await call('thread/shellCommand', { threadId: shell, command: 'true' });
    await note(completed(shell), 30000);
    const eph = (await call('thread/start', { cwd, ephemeral: true })).result.thread.id;
    const ephUsed = (await call('thread/start', { cwd, ephemeral: true })).result.thread.id;
    await turn(ephUsed, 'ephemeral');
    const quick = (await call('thread/start', { cwd })).result.thread.id;
    const q = await call('turn/start', { threadId: quick, input: text('HANG-MODEL now') });
    await call('turn/interrupt', { threadId: quick, turnId: q.result.turn.id });
    await note(completed(quick), 30000);
    const waited = (await call('thread/start', { cwd })).result.thread.id;
    const w = await call('turn/start', { threadId: waited, input: text('HANG-MODEL later') });
    await note((f) => f.method === 'turn/started' && f.params.threadId === waited, 30000);
    await pause(500);
    await call('turn/interrupt', { threadId: waited, turnId: w.result.turn.id });
    await note(completed(waited), 30000);
    const used = (await call('thread/start', { cwd })).result.thread.id;
    await turn(used, 'hello');
    const injected = (await call('thread/start', { cwd })).result.thread.id;
    await call('thread/inject_items', { threadId: injected, items: [{ type: 'message', role: 'user', content: [{ type: 'input_text', text: 'planted' }] }] });
    const settled = (await call('thread/start', { cwd })).result.thread.id;
    await call('thread/settings/update', { threadId: settled, model: 'other-model' });
    const goal = (await call('thread/start', { cwd })).result.thread.id;
    await call('thread/goal/set', { threadId: goal, objective: 'a goal' });
    const git = (await call('thread/start', { cwd })).result.thread.id;
    await call('thread/metadata/update', { threadId: git, gitInfo: { branch: 'main' } });
    await pause(500);
    await call('thread/fork', { threadId: plain });
    await call('thread/fork', { threadId: plain, ephemeral: true });
    const namedFork = await call('thread/fork', { threadId: named });
    await call('thread/fork', { threadId: shell });
    await call('thread/fork', { threadId: eph });
    await call('thread/fork', { threadId: ephUsed });
    await call('thread/fork', { threadId: quick });
    await call('thread/fork', { threadId: waited });
    await call('thread/fork', { threadId: used });
    await call('thread/fork', { threadId: injected });
    await call('thread/fork', { threadId: settled });
    await call('thread/fork', { threadId: goal });
    await call('thread/fork', { threadId: git });
    await call('thread/fork', { threadId: namedFork.result.thread.id });
    await call('thread/fork', { threadId: '00000000-0000-7000-8000-000000000000' });
    await pause(700);
    hanging.forEach((r) => r.destroy());
    ws.close();
    out.end();
    model.close();
    process.exit(0);
  });
}, 500);

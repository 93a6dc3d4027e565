// Capture of settings.jsonl: codex-cli 0.171.0 `codex app-server --listen
// ws://127.0.0.1:PORT` with approval_policy = "never", sandbox_mode =
// "workspace-write", the project trusted, model "fake-model" and
// model_provider "fake" = the small Responses server below, which answers
// every request with "ok" and logs what the request asked for (model,
// reasoning, service_tier) as a {"dir":"model"} line. Two clients: the
// first starts a thread and changes its settings with
// thread/settings/update (first the approval policy it already has, then
// a permission profile, the same again, model and
// effort and summary and service tier, approval policy, bad requests)
// after a first turn; the second resumes the thread after that turn and
// only listens ({"dir":"recv2"} lines
// are its notifications). A turn after the changes shows what the next
// model request used. Paths were then rewritten to /home/dev/project (cwd)
// and /home/dev/.codex (CODEX_HOME), as in the other captures.
// Usage: node settings_capture.js ws://127.0.0.1:PORT MODELPORT CWD settings.jsonl
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
    log('model', { model: b.model, reasoning: b.reasoning === undefined ? null : b.reasoning, service_tier: b.service_tier === undefined ? null : b.service_tier, text: b.text === undefined ? null : b.text });
    return sse(res, [{ type: 'message', role: 'assistant', id: 'msg_1', content: [{ type: 'output_text', text: 'ok', annotations: [] }] }]);
  });
});
model.listen(Number(modelPort), '127.0.0.1');

let id = 0;
function client(dir) {
  const pending = {};
  const notes = [];
  const ws = new WebSocket(url);
  ws.on('message', (data) => {
    const f = JSON.parse(data.toString('utf8'));
    if (dir === 'recv' || f.method === 'thread/settings/updated') log(dir, f);
    if (f.id !== undefined && pending[f.id]) {
      pending[f.id](f);
      delete pending[f.id];
    } else if (f.method) {
      notes.push(f);
    }
  });
  const c = {
    ws,
    open: new Promise((r) => ws.on('open', r)),
    call(method, params, quiet) {
      return new Promise((resolve) => {
        const f = { id: ++id, method, params };
        pending[f.id] = resolve;
        if (!quiet) log('send', f);
        ws.send(JSON.stringify(f));
      });
    },
    async note(pred, ms) {
      const end = Date.now() + ms;
      while (Date.now() < end) {
        const i = notes.findIndex(pred);
        if (i >= 0) return notes.splice(i, 1)[0];
        await new Promise((r) => setTimeout(r, 50));
      }
      return null;
    },
  };
  return c;
}
const pause = (ms) => new Promise((r) => setTimeout(r, ms));

setTimeout(async () => {
  const a = client('recv');
  await a.open;
  await a.call('initialize', { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } });
  a.ws.send(JSON.stringify({ method: 'initialized' }));
  const started = await a.call('thread/start', { cwd });
  const tid = started.result.thread.id;
  // An update that changes nothing, the first one of the thread.
  await a.call('thread/settings/update', { threadId: tid, approvalPolicy: 'never' });
  await pause(700);
  // A thread has no rollout to resume before its first turn.
  await a.call('turn/start', { threadId: tid, input: [{ type: 'text', text: 'first', text_elements: [] }] });
  await a.note((f) => f.method === 'turn/completed', 30000);
  const b = client('recv2');
  await b.open;
  await b.call('initialize', { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } }, true);
  b.ws.send(JSON.stringify({ method: 'initialized' }));
  await b.call('thread/resume', { threadId: tid }, true);
  const up = async (params) => { await a.call('thread/settings/update', { threadId: tid, ...params }); await pause(700); };
  await up({ permissions: ':read-only' });
  await up({ permissions: ':read-only' });
  await up({ model: 'other-model', effort: 'high' });
  await up({ summary: 'detailed', serviceTier: 'fast' });
  await up({ approvalPolicy: 'on-request' });
  await up({ serviceTier: null });
  await up({ permissions: ':bogus' });
  await up({ permissions: ':workspace', sandboxPolicy: { type: 'readOnly' } });
  await up({ sandboxPolicy: { type: 'dangerFullAccess' } });
  await up({});
  await a.call('thread/settings/update', { threadId: '00000000-0000-0000-0000-000000000000', model: 'x' });
  await a.call('turn/start', { threadId: tid, input: [{ type: 'text', text: 'hi', text_elements: [] }] });
  await a.note((f) => f.method === 'turn/completed', 30000);
  await up({ effort: 'low', model: 'fake-model' });
  await a.call('turn/start', { threadId: tid, input: [{ type: 'text', text: 'again', text_elements: [] }], effort: 'medium' });
  await a.note((f) => f.method === 'turn/completed', 30000);
  await pause(700);
  a.ws.close();
  b.ws.close();
  out.end();
  model.close();
  process.exit(0);
}, 500);

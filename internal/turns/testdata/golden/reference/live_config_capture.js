// Capture of live_config.jsonl: codex-cli 0.171.0 `codex app-server
// --listen ws://127.0.0.1:PORT` with approval_policy = "never",
// sandbox_mode = "danger-full-access", the project trusted, model
// "fake-model" and model_provider "fake" = the small Responses server
// below. That server logs, for every request, what it asked for (model,
// reasoning, service_tier, text) and the call ids of its input as a
// {"dir":"model"} line, and answers the first request of a turn with a
// exec_command call whose call id is always "call_same", the request
// carrying that call's output with "ok". The client starts a thread on
// gpt-5.5 (a model of the reference's catalog) and one on fake-model (not
// in it), runs a turn on the first, writes model_verbosity and
// service_tier with config/batchWrite (as the TUI's /model and /fast do),
// runs a second turn on the first thread (the model repeats the call id
// of the first turn), reads it, runs a turn on the fake-model thread, then
// starts a third thread on gpt-5.5 and runs a turn on it. The item
// notifications ({"dir":"recv"}) show the ids the reference gives the
// repeated call's items. Paths were then rewritten to /home/dev/project
// (cwd) and /home/dev/.codex (CODEX_HOME), as in the other captures.
// Usage: node live_config_capture.js ws://127.0.0.1:PORT MODELPORT CWD live_config.jsonl
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
    const calls = input.filter((it) => it.call_id).map((it) => ({ type: it.type, call_id: it.call_id, output: typeof it.output === 'string' ? it.output : undefined }));
    log('model', {
      model: b.model, reasoning: b.reasoning === undefined ? null : b.reasoning,
      service_tier: b.service_tier === undefined ? null : b.service_tier, text: b.text === undefined ? null : b.text,
      calls, tools: (b.tools || []).map((t) => t.name || t.type),
    });
    const last = input[input.length - 1] || {};
    if (last.type === 'function_call_output') {
      return sse(res, [{ type: 'message', role: 'assistant', id: `msg_${n + 1}`, content: [{ type: 'output_text', text: 'ok', annotations: [] }] }]);
    }
    return sse(res, [{ type: 'function_call', id: `fc_${n + 1}`, call_id: 'call_same', name: 'exec_command', arguments: JSON.stringify({ cmd: 'echo same' }) }]);
  });
});
model.listen(Number(modelPort), '127.0.0.1');

const ws = new WebSocket(url);
const pending = {};
const notes = [];
let id = 0;
const logged = /^(item\/(started|completed)|turn\/(started|completed)|error|configWarning)$/;
ws.on('message', (data) => {
  const f = JSON.parse(data.toString('utf8'));
  if (f.id !== undefined && pending[f.id]) {
    log('recv', f);
    pending[f.id](f);
    delete pending[f.id];
  } else if (f.method) {
    if (logged.test(f.method)) log('recv', f);
    notes.push(f);
  }
});
const call = (method, params) => new Promise((resolve) => {
  const f = { id: ++id, method, params };
  pending[f.id] = resolve;
  log('send', f);
  ws.send(JSON.stringify(f));
});
async function note(pred, ms) {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    const i = notes.findIndex(pred);
    if (i >= 0) return notes.splice(i, 1)[0];
    await new Promise((r) => setTimeout(r, 50));
  }
  return null;
}
const turnDone = () => note((f) => f.method === 'turn/completed', 30000);
const text = (t) => [{ type: 'text', text: t, text_elements: [] }];
ws.on('open', async () => {
  await call('initialize', { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } });
  ws.send(JSON.stringify({ method: 'initialized' }));
  const tid = (await call('thread/start', { cwd, model: 'gpt-5.5' })).result.thread.id;
  const other = (await call('thread/start', { cwd })).result.thread.id;
  await call('turn/start', { threadId: tid, input: text('first') });
  await turnDone();
  await call('config/batchWrite', {
    edits: [
      { keyPath: 'model_verbosity', value: 'high', mergeStrategy: 'replace' },
      { keyPath: 'service_tier', value: 'priority', mergeStrategy: 'replace' },
    ],
    reloadUserConfig: true,
  });
  await new Promise((r) => setTimeout(r, 500));
  await call('turn/start', { threadId: tid, input: text('second') });
  await turnDone();
  await call('thread/read', { threadId: tid, includeTurns: true });
  await call('thread/items/list', { threadId: tid, sortDirection: 'asc' });
  await call('turn/start', { threadId: other, input: text('third') });
  await turnDone();
  const t2 = (await call('thread/start', { cwd, model: 'gpt-5.5' })).result.thread.id;
  await call('turn/start', { threadId: t2, input: text('fourth') });
  await turnDone();
  await new Promise((r) => setTimeout(r, 500));
  ws.close();
  out.end();
  model.close();
  process.exit(0);
});

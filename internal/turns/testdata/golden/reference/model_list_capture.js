// Capture of model_list.jsonl: what codex-cli 0.171.0 `codex app-server
// --listen ws://127.0.0.1:PORT` answers to model/list for a custom
// provider, and the warnings it sends about the model. Config
// (CODEX_HOME/config.toml): model = "fake-model", model_provider "fake" =
// the small Responses server below (answers "ok"), approval_policy =
// "never"; no model catalog. model_list_catalog.jsonl is the same run
// with model_catalog_json = the file model_list_catalog.json (one model,
// fake-model) at the top of config.toml. The client initializes, lists models (all,
// with hidden ones, one per page), starts a thread, runs two turns, switches
// the thread to another model outside the catalog, runs a turn, and logs
// every frame but agent message deltas and token usage ({"dir":"recv"}).
// Machine paths were then rewritten to /home/dev/project and
// /home/dev/.codex.
// Usage: node model_list_capture.js ws://127.0.0.1:PORT MODELPORT CWD model_list.jsonl (or model_list_catalog.jsonl)
const http = require('http');
const WebSocket = require('ws');
const fs = require('fs');
const [url, modelPort, cwd, outFile] = process.argv.slice(2);

const out = fs.createWriteStream(outFile);
const log = (dir, frame) => out.write(JSON.stringify({ dir, frame }) + '\n');

let n = 0;
const model = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    if (!req.url.endsWith('/responses')) { res.writeHead(404); res.end(); return; }
    n++;
    res.writeHead(200, { 'content-type': 'text/event-stream' });
    const send = (type, b) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...b })}\n\n`);
    const item = { type: 'message', role: 'assistant', id: `msg_${n}`, content: [{ type: 'output_text', text: 'ok', annotations: [] }] };
    send('response.created', { response: { id: `resp_${n}` } });
    send('response.output_item.added', { output_index: 0, item });
    send('response.output_item.done', { output_index: 0, item });
    send('response.completed', { response: { id: `resp_${n}`, usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 } } });
    res.end();
  });
});
model.listen(Number(modelPort), '127.0.0.1');

const quiet = /^(item\/agentMessage\/delta|thread\/tokenUsage\/updated|account\/rateLimits\/updated)$/;
const ws = new WebSocket(url);
const pending = {};
const notes = [];
let id = 0;
ws.on('message', (data) => {
  const f = JSON.parse(data.toString('utf8'));
  if (!quiet.test(f.method || '')) log('recv', f);
  if (f.id !== undefined && f.method === undefined && pending[f.id]) { pending[f.id](f); delete pending[f.id]; return; }
  notes.push(f);
});
const call = (method, params) => new Promise((resolve) => {
  const f = { id: ++id, method, params };
  pending[f.id] = resolve;
  log('send', f);
  ws.send(JSON.stringify(f));
});
const pause = (ms) => new Promise((r) => setTimeout(r, ms));
ws.on('open', async () => {
  await call('initialize', { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } });
  ws.send(JSON.stringify({ method: 'initialized' }));
  await pause(500);
  await call('model/list', {});
  await call('model/list', { includeHidden: true });
  const first = await call('model/list', { limit: 1 });
  if (first.result && first.result.nextCursor) await call('model/list', { limit: 1, cursor: first.result.nextCursor });
  const tid = (await call('thread/start', { cwd })).result.thread.id;
  for (const text of ['hello', 'again']) {
    notes.length = 0;
    await call('turn/start', { threadId: tid, input: [{ type: 'text', text, text_elements: [] }] });
    const end = Date.now() + 20000;
    while (Date.now() < end && !notes.some((f) => f.method === 'turn/completed')) await pause(50);
  }
  // A model the thread switches to, also outside the catalog.
  await call('thread/settings/update', { threadId: tid, model: 'other-model' });
  notes.length = 0;
  await call('turn/start', { threadId: tid, input: [{ type: 'text', text: 'third', text_elements: [] }] });
  const end = Date.now() + 20000;
  while (Date.now() < end && !notes.some((f) => f.method === 'turn/completed')) await pause(50);
  await pause(500);
  ws.close();
  out.end();
  model.close();
  process.exit(0);
});

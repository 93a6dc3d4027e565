// Capture of notify_idle_model.json: codex-cli 0.171.0 `codex app-server
// --listen ws://127.0.0.1:PORT` with [features] multi_agent = true, an
// unknown model slug and model_provider "fake" = the small Responses
// server below (request_max_retries = 0, stream_max_retries = 0). The
// parent's turn spawns a child and ends at once; the child answers 1.5 s
// later; 3 s after the parent's turn ended the client starts its second
// turn. The file keeps the last two input items of that turn's request
// (ids removed): how an idle parent hears of its child's end.
// Usage: node notify_capture.js ws://127.0.0.1:PORT MODELPORT PROJECT_DIR > notify_idle_model.json
const http = require('http');
const WebSocket = require('ws');
const [url, modelPort, project] = process.argv.slice(2);

const bodies = [];
let n = 0;
function sse(res, items) {
  n++;
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const send = (type, body) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`);
  send('response.created', { response: { id: `resp_${n}` } });
  items.forEach((item, i) => {
    send('response.output_item.added', { output_index: i, item });
    send('response.output_item.done', { output_index: i, item });
  });
  send('response.completed', { response: { id: `resp_${n}`, usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 } } });
  res.end();
}
const msg = (text) => ({ type: 'message', role: 'assistant', id: `msg_${n + 1}`, content: [{ type: 'output_text', text, annotations: [] }] });
const model = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    if (!req.url.endsWith('/responses')) { res.writeHead(404); res.end(); return; }
    const b = JSON.parse(body);
    bodies.push(b);
    const all = JSON.stringify(b.input);
    const outs = b.input.filter((it) => it.type === 'function_call_output').map((it) => it.call_id);
    if (all.includes('Spawn a helper')) {
      if (all.includes('Second prompt')) return sse(res, [msg('Second done.')]);
      if (outs.includes('call_spawn')) return sse(res, [msg('Parent done.')]);
      return sse(res, [{ type: 'function_call', id: 'fc_call_spawn', call_id: 'call_spawn', name: 'spawn_agent', namespace: 'multi_agent_v1', arguments: JSON.stringify({ message: 'child task' }) }]);
    }
    if (all.includes('child task')) { setTimeout(() => sse(res, [msg('The child answer.')]), 1500); return; }
    return sse(res, [msg('(unscripted)')]);
  });
});
model.listen(Number(modelPort), '127.0.0.1');

const ws = new WebSocket(url);
let nextId = 1;
const waiting = new Map();
const seen = [];
ws.on('message', (data) => {
  const f = JSON.parse(data.toString('utf8'));
  seen.push(f);
  if (f.id !== undefined && waiting.has(f.id)) { waiting.get(f.id)(f); waiting.delete(f.id); }
});
const call = (method, params) => new Promise((resolve) => { const id = nextId++; waiting.set(id, resolve); ws.send(JSON.stringify({ id, method, params })); });
const until = (cond) => new Promise((resolve) => { const tick = () => (cond() ? resolve() : setTimeout(tick, 50)); tick(); });
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
ws.on('open', async () => {
  await call('initialize', { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } });
  ws.send(JSON.stringify({ method: 'initialized' }));
  const tid = (await call('thread/start', { cwd: project, sandbox: 'read-only', approvalPolicy: 'never' })).result.thread.id;
  const text = (t) => [{ type: 'text', text: t, text_elements: [] }];
  const ends = () => seen.filter((f) => f.method === 'turn/completed' && f.params.threadId === tid).length;
  await call('turn/start', { threadId: tid, input: text('Spawn a helper') });
  await until(() => ends() >= 1);
  await sleep(3000);
  await call('turn/start', { threadId: tid, input: text('Second prompt') });
  await until(() => ends() >= 2);
  const second = bodies.filter((b) => JSON.stringify(b.input).includes('Second prompt'));
  const last = second[second.length - 1].input.slice(-2).map(({ id, ...rest }) => rest);
  process.stdout.write(JSON.stringify({ about: 'codex-cli 0.171.0, features.multi_agent: the parent spawns a child and ends its turn at once; the child answers 1.5 s later; the parent\'s next turn starts 3 s after the first ended; no turn started for the note. The last two input items of that turn\'s request (see notify_capture.js).', requests: bodies.length, second_turn_last_inputs: last }, null, 1) + '\n');
  ws.close();
  model.close();
  process.exit(0);
});

// Capture of agents_turns.jsonl: codex-cli 0.169.0 `codex app-server --listen
// ws://127.0.0.1:PORT` with [features] multi_agent = true and an unknown
// model slug (so it offers the multi_agent_v1 namespace), model_provider
// "fake" = the small Responses server below, which records every request
// body (agents_model.json keeps the multi_agent_v1 namespace the first
// request offered and the last input item of each request). The parent's turn spawns one child, waits for
// it with the id spawn_agent returned, then answers; the child answers at
// once. Usage: node agents_capture.js ws://127.0.0.1:PORT MODELPORT agents_turns.jsonl agents_model.json
const http = require('http');
const WebSocket = require('ws');
const fs = require('fs');
const [url, modelPort, outFile, modelFile] = process.argv.slice(2);

// The fake model: answers by the last input item of each request.
const requests = [];
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
const msg = (text) => ({ type: 'message', role: 'assistant', id: `msg_${n + 1}`, content: [{ type: 'output_text', text, annotations: [] }] });
const call = (callId, name, args) => ({ type: 'function_call', id: `fc_${callId}`, call_id: callId, name, namespace: 'multi_agent_v1', arguments: JSON.stringify(args) });
function userText(input) {
  for (let i = input.length - 1; i >= 0; i--) {
    const it = input[i];
    if (it.type === 'message' && it.role === 'user') return (it.content || []).map((c) => c.text || '').join('');
  }
  return '';
}
const model = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    let b = {};
    try { b = JSON.parse(body); } catch (e) { /* a non-JSON probe */ }
    requests.push({ path: req.url, body: b });
    if (!req.url.endsWith('/responses')) { res.writeHead(404); res.end(); return; }
    const input = b.input || [];
    const last = input[input.length - 1] || {};
    if (last.type === 'function_call_output' && last.call_id === 'call_spawn') {
      const out = JSON.parse(last.output);
      return sse(res, [call('call_wait', 'wait_agent', { targets: [out.agent_id], timeout_ms: 20000 })]);
    }
    if (last.type === 'function_call_output' && last.call_id === 'call_wait') return sse(res, [msg('Parent done.')]);
    const text = userText(input);
    // The reference tells the parent of its child's end in a user message.
    if (text.includes('<subagent_notification>')) return sse(res, [msg('Parent done.')]);
    if (text.includes('Spawn a helper')) return sse(res, [call('call_spawn', 'spawn_agent', { message: 'child task' })]);
    if (text.includes('child task')) return sse(res, [msg('The child answer.')]);
    return sse(res, [msg('(unscripted)')]);
  });
});
model.listen(Number(modelPort), '127.0.0.1');

const out = fs.createWriteStream(outFile);
const t0 = Date.now();
const log = (dir, frame) => out.write(JSON.stringify({ dir, t: Date.now() - t0, frame }) + '\n');
const recvd = [];
let waiter = null;
function send(ws, f) { log('send', f); ws.send(JSON.stringify(f)); }
const resp = (id) => recvd.find((f) => f.id === id && (f.result !== undefined || f.error !== undefined));
async function waitFor(pred, max) {
  const deadline = Date.now() + max;
  while (!pred() && Date.now() < deadline) await new Promise((r) => { waiter = r; setTimeout(r, 50); });
}
setTimeout(() => {
  const ws = new WebSocket(url);
  ws.on('message', (data) => {
    const f = JSON.parse(data.toString('utf8'));
    log('recv', f);
    recvd.push(f);
    if (f.id !== undefined && f.method !== undefined) {
      const reply = { id: f.id, result: { decision: 'accept' } };
      log('send', reply);
      ws.send(JSON.stringify(reply));
    }
    if (waiter) waiter();
  });
  ws.on('open', async () => {
    send(ws, { id: 'initialize', method: 'initialize', params: { clientInfo: { name: 'codex-tui', title: null, version: '0.169.0' }, capabilities: { experimentalApi: true } } });
    await waitFor(() => resp('initialize'), 5000);
    send(ws, { method: 'initialized' });
    send(ws, { id: 1, method: 'thread/start', params: { cwd: '/home/dev/project', sandbox: 'read-only', approvalPolicy: 'never' } });
    await waitFor(() => resp(1), 10000);
    const tid = resp(1).result.thread.id;
    send(ws, { id: 2, method: 'turn/start', params: { threadId: tid, input: [{ type: 'text', text: 'Spawn a helper', text_elements: [] }] } });
    await waitFor(() => recvd.some((f) => f.method === 'turn/completed' && f.params.threadId === tid), 60000);
    const spawned = recvd.find((f) => f.method === 'item/completed' && f.params.item.type === 'collabAgentToolCall' && f.params.item.tool === 'spawnAgent');
    const child = spawned.params.item.receiverThreadIds[0];
    send(ws, { id: 3, method: 'thread/read', params: { threadId: child, includeTurns: true } });
    await waitFor(() => resp(3), 5000);
    send(ws, { id: 4, method: 'thread/loaded/list', params: {} });
    await waitFor(() => resp(4), 5000);
    send(ws, { id: 5, method: 'thread/list', params: {} });
    await waitFor(() => resp(5), 5000);
    send(ws, { id: 6, method: 'thread/list', params: { sourceKinds: ['subAgentThreadSpawn'] } });
    await waitFor(() => resp(6), 5000);
    send(ws, { id: 7, method: 'thread/archive', params: { threadId: tid } });
    await waitFor(() => resp(7), 5000);
    await new Promise((r) => setTimeout(r, 1000));
    ws.close();
    out.end();
    fs.writeFileSync(modelFile, JSON.stringify(withoutPrompts(requests), null, 1));
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

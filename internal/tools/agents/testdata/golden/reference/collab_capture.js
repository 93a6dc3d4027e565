// Capture of collab_turns.jsonl and collab_model.json: codex-cli 0.171.0
// `codex app-server --listen ws://127.0.0.1:PORT` with [features]
// multi_agent_v2 = true, model "gpt-5.5", model_provider "fake" = the small
// Responses server below (request_max_retries = 0, stream_max_retries = 0).
// The parent's turn spawns one child (collaboration.spawn_agent, task_name
// "helper", fork_turns "none"), waits (wait_agent), lists its agents
// (list_agents), then answers; the child answers at once; then a second
// turn of the parent. collab_model.json keeps the collaboration namespace
// the first request offered and the last two input items of each request
// (ids removed). The project directory was replaced by /home/dev/project
// and CODEX_HOME by /home/dev/.codex in both files.
// With FLOW=more (collab_more_turns.jsonl, collab_more_model.json) the
// child answers only after 3 s, and the parent interrupts it
// (interrupt_agent), gives it a follow-up task (followup_task, answered
// after 1 s), sends it a message (send_message), waits, then answers.
// Usage: [FLOW=more] PROJECT=DIR node collab_capture.js ws://127.0.0.1:PORT MODELPORT collab_turns.jsonl collab_model.json
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
const call = (callId, name, args) => ({ type: 'function_call', id: `fc_${callId}`, call_id: callId, name, namespace: 'collaboration', arguments: JSON.stringify(args) });
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
    const all = JSON.stringify(input);
    const outs = input.filter((it) => it.type === 'function_call_output').map((it) => it.call_id);
    if (process.env.FLOW === 'more') {
      if (all.includes('Spawn a helper')) {
        if (all.includes('Second prompt')) return sse(res, [msg('Second done.')]);
        if (outs.includes('call_wait')) return sse(res, [msg('Parent done.')]);
        if (outs.includes('call_send')) return sse(res, [call('call_wait', 'wait_agent', { timeout_ms: 20000 })]);
        if (outs.includes('call_follow')) return sse(res, [call('call_send', 'send_message', { target: 'helper', message: 'a note' })]);
        if (outs.includes('call_int')) return sse(res, [call('call_follow', 'followup_task', { target: 'helper', message: 'more work' })]);
        if (outs.includes('call_spawn')) return sse(res, [call('call_int', 'interrupt_agent', { target: 'helper' })]);
        return sse(res, [call('call_spawn', 'spawn_agent', { task_name: 'helper', message: 'child task', fork_turns: 'none' })]);
      }
      if (all.includes('more work')) { setTimeout(() => sse(res, [msg('The child answer.')]), 1000); return; }
      if (all.includes('child task')) { setTimeout(() => sse(res, [msg('first answer')]), 3000); return; }
    }
    if (all.includes('Spawn a helper')) {
      if (all.includes('Second prompt')) return sse(res, [msg('Second done.')]);
      if (outs.includes('call_list')) return sse(res, [msg('Parent done.')]);
      if (outs.includes('call_wait')) return sse(res, [call('call_list', 'list_agents', {})]);
      if (outs.includes('call_spawn')) return sse(res, [call('call_wait', 'wait_agent', { timeout_ms: 20000 })]);
      return sse(res, [call('call_spawn', 'spawn_agent', { task_name: 'helper', message: 'child task', fork_turns: 'none' })]);
    }
    if (all.includes('child task')) return sse(res, [msg('The child answer.')]);
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
    send(ws, { id: 'initialize', method: 'initialize', params: { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } } });
    await waitFor(() => resp('initialize'), 5000);
    send(ws, { method: 'initialized' });
    send(ws, { id: 1, method: 'thread/start', params: { cwd: process.env.PROJECT, sandbox: 'read-only', approvalPolicy: 'never' } });
    await waitFor(() => resp(1), 10000);
    const tid = resp(1).result.thread.id;
    send(ws, { id: 2, method: 'turn/start', params: { threadId: tid, input: [{ type: 'text', text: 'Spawn a helper', text_elements: [] }] } });
    await waitFor(() => recvd.some((f) => f.method === 'turn/completed' && f.params.threadId === tid), 60000);
    send(ws, { id: 20, method: 'turn/start', params: { threadId: tid, input: [{ type: 'text', text: 'Second prompt', text_elements: [] }] } });
    await waitFor(() => recvd.filter((f) => f.method === 'turn/completed' && f.params.threadId === tid).length >= 2, 60000);
    const spawned = recvd.find((f) => f.method === 'item/completed' && f.params.item.type === 'subAgentActivity');
    const child = spawned.params.item.agentThreadId;
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
    const bodies = requests.filter((r) => r.path.endsWith('/responses')).map((r) => r.body);
    const trimmed = {
      collaboration_tools: bodies[0].tools.find((t) => t.name === 'collaboration'),
      requests_last_inputs: bodies.map((b) => b.input.slice(-2).map(({ id, ...rest }) => rest)),
    };
    fs.writeFileSync(modelFile, JSON.stringify(withoutPrompts(trimmed), null, 1) + '\n');
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

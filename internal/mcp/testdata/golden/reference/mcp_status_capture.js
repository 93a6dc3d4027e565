// Capture of mcp_status.jsonl: which mcpServer/startupStatus/updated
// codex-cli 0.171.0 `codex app-server --listen ws://127.0.0.1:PORT` sends
// on thread/resume and for a sub-agent's thread.
//
// Config (CODEX_HOME/config.toml): model = "fake-model", model_provider
// "fake" = the small Responses server below (request_max_retries = 0,
// stream_max_retries = 0), approval_policy = "never", [features]
// multi_agent = true, and one stdio server [mcp_servers.my-srv], the MCP
// test server built from internal/mcp/testdata/mcptestserver.
// Client 1 starts thread A, waits for its server to leave "starting" and
// runs a turn whose model spawns a sub-agent (multi_agent_v1 spawn_agent)
// and waits for it; client 2 then connects and resumes A; client 1 resumes
// A too (already loaded, already its subscriber). Then the server is
// restarted on the same CODEX_HOME and the script run again with A's id
// (mcp_status_resume.jsonl): client 1 resumes A (not loaded) and runs a
// turn on it, client 2 then resumes A. Each {"dir":"recv1"} /
// {"dir":"recv2"} line is a notification or answer a client got (agent
// message deltas and token usage left out); the thread, turn and item ids
// and times are kept as the reference sent them. Machine paths were then
// rewritten to /home/dev/project and /home/dev/.codex.
// Usage: node mcp_status_capture.js ws://127.0.0.1:PORT MODELPORT CWD mcp_status.jsonl
//        node mcp_status_capture.js ws://127.0.0.1:PORT MODELPORT CWD mcp_status_resume.jsonl THREAD_A
const http = require('http');
const WebSocket = require('ws');
const fs = require('fs');
const [url, modelPort, cwd, outFile, resumeID] = process.argv.slice(2);

const out = fs.createWriteStream(outFile);
const t0 = Date.now();
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
    if (!req.url.endsWith('/responses')) { res.writeHead(404); res.end(); return; }
    const input = b.input || [];
    const last = input[input.length - 1] || {};
    if (last.type === 'function_call_output' && last.call_id === 'call_spawn') {
      const o = JSON.parse(last.output);
      return sse(res, [call('call_wait', 'wait_agent', { targets: [o.agent_id], timeout_ms: 20000 })]);
    }
    if (last.type === 'function_call_output' && last.call_id === 'call_wait') return sse(res, [msg('Parent done.')]);
    const text = userText(input);
    if (text.includes('<subagent_notification>')) return sse(res, [msg('Parent done.')]);
    if (text.includes('Spawn a helper')) return sse(res, [call('call_spawn', 'spawn_agent', { message: 'child task' })]);
    if (text.includes('child task')) return sse(res, [msg('The child answer.')]);
    return sse(res, [msg('ok')]);
  });
});
model.listen(Number(modelPort), '127.0.0.1');

const quiet = /^(item\/agentMessage\/delta|thread\/tokenUsage\/updated|account\/rateLimits\/updated)$/;
function client(dir) {
  const pending = {};
  const notes = [];
  const ws = new WebSocket(url);
  let id = 0;
  ws.on('message', (data) => {
    const f = JSON.parse(data.toString('utf8'));
    if (!quiet.test(f.method || '')) log(dir, f);
    if (f.id !== undefined && f.method === undefined && pending[f.id]) { pending[f.id](f); delete pending[f.id]; return; }
    if (f.id !== undefined && f.method !== undefined) ws.send(JSON.stringify({ id: f.id, result: { decision: 'accept' } }));
    notes.push(f);
  });
  const c = {
    ws,
    notes,
    open: new Promise((r) => ws.on('open', r)),
    call(method, params) {
      return new Promise((resolve) => {
        const f = { id: ++id, method, params };
        pending[f.id] = resolve;
        log('send' + dir.slice(4), f);
        ws.send(JSON.stringify(f));
      });
    },
    async until(pred, ms) {
      const end = Date.now() + ms;
      while (Date.now() < end) {
        if (notes.some(pred)) return true;
        await new Promise((r) => setTimeout(r, 50));
      }
      return false;
    },
  };
  return c;
}
const pause = (ms) => new Promise((r) => setTimeout(r, ms));
const init = async (c) => {
  await c.open;
  await c.call('initialize', { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } });
  c.ws.send(JSON.stringify({ method: 'initialized' }));
};

function finish(...clients) {
  clients.forEach((c) => c.ws.close());
  out.end();
  model.close();
  process.exit(0);
}

async function resumeRun() {
  const a = client('recv1');
  await init(a);
  await a.call('thread/resume', { threadId: resumeID });
  await pause(3000);
  await a.call('turn/start', { threadId: resumeID, input: [{ type: 'text', text: 'again', text_elements: [] }] });
  await a.until((f) => f.method === 'turn/completed' && f.params.threadId === resumeID, 60000);
  const b = client('recv2');
  await init(b);
  await b.call('thread/resume', { threadId: resumeID });
  await pause(3000);
  finish(a, b);
}

setTimeout(async () => {
  if (resumeID) return resumeRun();
  const a = client('recv1');
  await init(a);
  const tid = (await a.call('thread/start', { cwd })).result.thread.id;
  await a.until((f) => f.method === 'mcpServer/startupStatus/updated' && f.params.status !== 'starting', 20000);
  await a.call('turn/start', { threadId: tid, input: [{ type: 'text', text: 'Spawn a helper', text_elements: [] }] });
  await a.until((f) => f.method === 'turn/completed' && f.params.threadId === tid, 60000);
  await pause(1500);
  const b = client('recv2');
  await init(b);
  await b.call('thread/resume', { threadId: tid });
  await pause(3000);
  await a.call('thread/resume', { threadId: tid });
  await pause(3000);
  finish(a, b);
}, 500);

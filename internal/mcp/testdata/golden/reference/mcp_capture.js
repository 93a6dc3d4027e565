// Capture of mcp_turns.jsonl: codex-cli 0.169.0 `codex app-server --listen
// ws://127.0.0.1:PORT` with config model = "fake-model" (not a catalog
// slug), model_provider "fake" = the small Responses server below, which
// records every request body, and [mcp_servers.t] command = the MCP test
// server built from internal/mcp/testdata/mcptestserver (stdio). The thread
// starts in the script's working directory (on-request, workspace-write):
// the reference spawns the server there, and a cwd that does not exist
// fails its startup. One turn calls four of the server's tools in a row
// (echo: text; add: read-only, structuredContent; fail: isError; image:
// text + image), approving each prompt, then answers; the client then asks
// mcpServerStatus/list without and with the thread. mcp_model.json keeps
// the mcp__t namespace the first request offered, the names of all its
// tools, and the last input item of each request (the function_call_output
// the reference sent back). Machine paths were rewritten to /home/dev/...
// mcp_never_turns.jsonl and mcp_never_model.json are the same run under the
// approval policy never (the last argument).
// Usage: node mcp_capture.js ws://127.0.0.1:PORT MODELPORT mcp_turns.jsonl mcp_model.json [POLICY]
const http = require('http');
const WebSocket = require('ws');
const fs = require('fs');
const [url, modelPort, outFile, modelFile, policy = 'on-request'] = process.argv.slice(2);

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
// codex 0.169.0 offers a server's tools as the namespace mcp__<server>.
const call = (callId, name, args) => ({ type: 'function_call', id: `fc_${callId}`, call_id: callId, namespace: 'mcp__t', name, arguments: JSON.stringify(args) });
// The calls in order: each answers the previous one's output.
const calls = [
  ['call_echo', 'echo', { text: 'hi' }],
  ['call_add', 'add', { a: 2, b: 3 }],
  ['call_fail', 'fail', {}],
  ['call_image', 'image', {}],
];
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
    if (last.type === 'function_call_output') {
      const i = calls.findIndex((c) => c[0] === last.call_id);
      if (i >= 0 && i + 1 < calls.length) return sse(res, [call(...calls[i + 1])]);
      return sse(res, [msg('MCP done.')]);
    }
    return sse(res, [call(...calls[0])]);
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
      const result = f.method === 'mcpServer/elicitation/request' ? { action: 'accept', content: {}, _meta: null } : { decision: 'accept' };
      const reply = { id: f.id, result };
      log('send', reply);
      ws.send(JSON.stringify(reply));
    }
    if (waiter) waiter();
  });
  ws.on('open', async () => {
    send(ws, { id: 'initialize', method: 'initialize', params: { clientInfo: { name: 'codex-tui', title: null, version: '0.169.0' }, capabilities: { experimentalApi: true } } });
    await waitFor(() => resp('initialize'), 5000);
    send(ws, { method: 'initialized' });
    send(ws, { id: 1, method: 'thread/start', params: { cwd: process.cwd(), sandbox: 'workspace-write', approvalPolicy: policy } });
    await waitFor(() => resp(1), 10000);
    const tid = resp(1).result.thread.id;
    await waitFor(() => recvd.some((f) => f.method === 'mcpServer/startupStatus/updated' && f.params.status !== 'starting'), 10000);
    send(ws, { id: 2, method: 'turn/start', params: { threadId: tid, input: [{ type: 'text', text: 'Call the MCP tools', text_elements: [] }] } });
    await waitFor(() => recvd.some((f) => f.method === 'turn/completed' && f.params.threadId === tid), 60000);
    send(ws, { id: 3, method: 'mcpServerStatus/list', params: {} });
    await waitFor(() => resp(3), 5000);
    send(ws, { id: 4, method: 'mcpServerStatus/list', params: { threadId: tid, detail: 'toolsAndAuthOnly' } });
    await waitFor(() => resp(4), 5000);
    await new Promise((r) => setTimeout(r, 500));
    ws.close();
    out.end();
    const first = requests[0].body;
    fs.writeFileSync(modelFile, JSON.stringify({
      mcp_namespace: first.tools.find((t) => t.type === 'namespace' && t.name === 'mcp__t'),
      tool_names: first.tools.map((t) => t.name || t.type),
      last_input: requests.map((r) => r.body.input[r.body.input.length - 1]),
    }, null, 1) + '\n');
    model.close();
    process.exit(0);
  });
}, 1500);

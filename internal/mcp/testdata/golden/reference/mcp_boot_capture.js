// Capture of mcp_boot_turns.jsonl and mcp_boot_model.json: how codex-cli
// 0.171.0 `codex app-server --listen ws://127.0.0.1:PORT` reports its MCP
// servers' start-up per thread, names their tools, and honours a thread's
// server switches.
//
// Config (CODEX_HOME/config.toml): model = "fake-model", model_provider
// "fake" = the small Responses server below (it records every request body
// and answers each with one assistant message; request_max_retries = 0,
// stream_max_retries = 0), and two stdio servers:
//   [mcp_servers.my-srv]     the MCP test server built from
//                            internal/mcp/testdata/mcptestserver
//   [mcp_servers.everything] the pinned @modelcontextprotocol/server-everything
//                            (args = ["stdio"])
// The client starts thread A (no config), waits for A's statuses of both
// servers to leave "starting", and runs a turn; then thread B with config
// {"mcp_servers.my-srv.enabled": false} (waits for its everything status),
// and a turn; then thread C with both servers disabled, and a turn; then
// mcpServerStatus/list. mcp_boot_model.json keeps, per request, the
// thread's label and the tools offered (a namespace as its name,
// description and functions' names). Machine paths were rewritten to
// /home/dev/....
//
// The same script, with [mcp_servers.slow-srv] = `sh -c "sleep N; exec
// mcptestserver"` (startup_timeout_sec = 30) as the only server, measured
// how long a first turn waits for a server still starting: with N = 0.6 the
// first request offered mcp__slow_srv, with N = 1.0, 1.3, 1.6 and 3 it did
// not (its request left about 1.1 s after turn/started, without the
// server's tools, the server being reported ready later); without any MCP
// server the request left about 0.2 s after turn/started. A wrapper that
// copied the server's stdin (tee) showed the initialize codex sends:
// protocolVersion "2025-06-18", capabilities {"elicitation": {"form": {},
// "url": {}}}, clientInfo {"name": "codex-mcp-client", "title": "Codex",
// "version": "0.171.0"}.
// Usage: node mcp_boot_capture.js ws://127.0.0.1:PORT MODELPORT OUTDIR
const http = require('http');
const WebSocket = require('ws');
const fs = require('fs');
const path = require('path');
const [url, modelPort, outDir] = process.argv.slice(2);

const t0 = Date.now();
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
const model = http.createServer((req, res) => {
  let body = '';
  req.on('data', (d) => (body += d));
  req.on('end', () => {
    let b = {};
    try { b = JSON.parse(body); } catch (e) { /* a non-JSON probe */ }
    if (!req.url.endsWith('/responses')) { res.writeHead(404); res.end(); return; }
    requests.push({ t: Date.now() - t0, body: b });
    return sse(res, [msg('ok')]);
  });
});
model.listen(Number(modelPort), '127.0.0.1');

const out = fs.createWriteStream(path.join(outDir, 'mcp_boot_turns.jsonl'));
const log = (dir, frame) => out.write(JSON.stringify({ dir, t: Date.now() - t0, frame }) + '\n');
const recvd = [];
let waiter = null;
function send(ws, f) { log('send', f); ws.send(JSON.stringify(f)); }
const resp = (id) => recvd.find((f) => f.id === id && (f.result !== undefined || f.error !== undefined));
async function waitFor(pred, max) {
  const deadline = Date.now() + max;
  while (!pred() && Date.now() < deadline) await new Promise((r) => { waiter = r; setTimeout(r, 50); });
}
function connect() {
  const ws = new WebSocket(url);
  ws.on('error', () => setTimeout(connect, 100));
  ws.on('message', (data) => {
    const f = JSON.parse(data.toString('utf8'));
    log('recv', f);
    recvd.push(f);
    if (f.id !== undefined && f.method !== undefined) {
      const reply = { id: f.id, result: { decision: 'decline' } };
      log('send', reply);
      ws.send(JSON.stringify(reply));
    }
    if (waiter) waiter();
  });
  ws.on('open', () => run(ws));
}
const settled = (tid, name) => recvd.some((f) => f.method === 'mcpServer/startupStatus/updated' && f.params.threadId === tid && f.params.name === name && f.params.status !== 'starting');
async function turn(ws, id, config, label, servers) {
  send(ws, { id, method: 'thread/start', params: { cwd: process.cwd(), sandbox: 'workspace-write', approvalPolicy: 'on-request', config } });
  await waitFor(() => resp(id), 10000);
  if (!resp(id).result) return null;
  const tid = resp(id).result.thread.id;
  await waitFor(() => servers.every((name) => settled(tid, name)), 20000);
  const before = requests.length;
  send(ws, { id: id + 1, method: 'turn/start', params: { threadId: tid, input: [{ type: 'text', text: `hello ${label}`, text_elements: [] }] } });
  await waitFor(() => recvd.some((f) => f.method === 'turn/completed' && f.params.threadId === tid), 60000);
  for (const r of requests.slice(before)) r.label = label;
  return tid;
}
async function run(ws) {
  send(ws, { id: 'initialize', method: 'initialize', params: { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } } });
  await waitFor(() => resp('initialize'), 5000);
  send(ws, { method: 'initialized' });
  await turn(ws, 10, null, 'A', ['everything', 'my-srv']);
  await turn(ws, 20, { 'mcp_servers.my-srv.enabled': false }, 'B', ['everything']);
  await turn(ws, 30, { 'mcp_servers.my-srv.enabled': false, 'mcp_servers.everything.enabled': false }, 'C', []);
  send(ws, { id: 40, method: 'mcpServerStatus/list', params: { detail: 'toolsAndAuthOnly' } });
  await waitFor(() => resp(40), 5000);
  await new Promise((r) => setTimeout(r, 1500));
  ws.close();
  out.end();
  const tools = (b) => (b.tools || []).map((t) => (t.type === 'namespace' ? { namespace: t.name, description: t.description, tools: t.tools.map((f) => f.name) } : t.name || t.type));
  fs.writeFileSync(path.join(outDir, 'mcp_boot_model.json'), JSON.stringify(requests.map((r) => ({ thread: r.label, t: r.t, tools: tools(r.body) })), null, 1) + '\n');
  model.close();
  process.exit(0);
}
connect();

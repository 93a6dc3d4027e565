// Capture of mcp_search_model.json: codex-cli 0.169.0 `codex app-server
// --listen ws://127.0.0.1:PORT` configured as for mcp_capture.js (the MCP
// test server as [mcp_servers.t], model_provider "fake" = the Responses
// server below) but with a thread on the catalog model gpt-5.5, which
// defers MCP tools behind tool_search, under the approval policy never.
// The model searches ("echo text", limit 1), calls what the search
// returned in its namespace, then answers. The file keeps the tool_search
// spec of the first request, the names of its tools, and the last two
// input items of the second and third requests (the search call and its
// output; the namespaced call and its output).
// Usage: node mcp_search_capture.js ws://127.0.0.1:PORT MODELPORT out.json
const http = require('http');
const fs = require('fs');
const WebSocket = require('ws');
const [url, modelPort, outFile] = process.argv.slice(2);
const requests = [];
let n = 0;
function sse(res, items) {
  n++;
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const send = (type, body) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`);
  send('response.created', { response: { id: `resp_${n}` } });
  items.forEach((item, i) => { send('response.output_item.added', { output_index: i, item }); send('response.output_item.done', { output_index: i, item }); });
  send('response.completed', { response: { id: `resp_${n}`, usage: { input_tokens: 10, input_tokens_details: { cached_tokens: 0 }, output_tokens: 5, output_tokens_details: { reasoning_tokens: 0 }, total_tokens: 15 } } });
  res.end();
}
const model = http.createServer((req, res) => {
  let body = ''; req.on('data', (d) => (body += d)); req.on('end', () => {
    let b = {}; try { b = JSON.parse(body); } catch (e) {}
    requests.push({ path: req.url, body: b });
    if (!req.url.endsWith('/responses')) { res.writeHead(404); res.end(); return; }
    const input = b.input || []; const last = input[input.length - 1] || {};
    if (last.type === 'tool_search_output') {
      const ns = last.tools && last.tools[0] ? last.tools[0].name : 'mcp__t';
      return sse(res, [{ type: 'function_call', id: 'fc_1', call_id: 'call_echo', namespace: ns, name: 'echo', arguments: '{"text":"found"}' }]);
    }
    if (last.type === 'function_call_output') return sse(res, [{ type: 'message', role: 'assistant', id: 'msg_x', content: [{ type: 'output_text', text: 'done', annotations: [] }] }]);
    return sse(res, [{ type: 'tool_search_call', id: 'tsc_1', call_id: 'call_s', execution: 'client', arguments: { query: 'echo text', limit: 1 }, status: 'completed' }]);
  });
});
model.listen(Number(modelPort), '127.0.0.1');
const recvd = []; let waiter = null;
const ws = new WebSocket(url);
const resp = (id) => recvd.find((f) => f.id === id && (f.result !== undefined || f.error !== undefined));
async function waitFor(pred, max) { const dl = Date.now() + max; while (!pred() && Date.now() < dl) await new Promise((r) => { waiter = r; setTimeout(r, 50); }); }
ws.on('message', (d) => { const f = JSON.parse(d.toString()); recvd.push(f); if (f.id !== undefined && f.method) ws.send(JSON.stringify({ id: f.id, result: f.method === 'mcpServer/elicitation/request' ? { action: 'accept', content: {}, _meta: null } : { decision: 'accept' } })); if (waiter) waiter(); });
ws.on('open', async () => {
  ws.send(JSON.stringify({ id: 'i', method: 'initialize', params: { clientInfo: { name: 'codex-tui', title: null, version: '0.169.0' }, capabilities: { experimentalApi: true } } }));
  await waitFor(() => resp('i'), 5000); ws.send(JSON.stringify({ method: 'initialized' }));
  ws.send(JSON.stringify({ id: 1, method: 'thread/start', params: { cwd: process.cwd(), model: 'gpt-5.5', approvalPolicy: 'never' } }));
  await waitFor(() => resp(1), 10000); const tid = resp(1).result.thread.id;
  await waitFor(() => recvd.some((f) => f.method === 'mcpServer/startupStatus/updated' && f.params.status !== 'starting'), 10000);
  ws.send(JSON.stringify({ id: 2, method: 'turn/start', params: { threadId: tid, input: [{ type: 'text', text: 'search', text_elements: [] }] } }));
  await waitFor(() => recvd.some((f) => f.method === 'turn/completed'), 30000);
  const r = requests;
  fs.writeFileSync(outFile, JSON.stringify({
    tool_search: withoutPrompts(r[0].body.tools.find((t) => t.type === "tool_search"), true),
    tool_names: r[0].body.tools.map((t) => t.name || t.type),
    search_call_and_output: r[1].body.input.slice(-2),
    namespaced_call_and_output: r[2].body.input.slice(-2),
  }, null, 1) + "\n");
  process.exit(0);
});

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

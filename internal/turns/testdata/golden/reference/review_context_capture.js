// Capture of review_context.jsonl: codex-cli 0.171.0 `codex app-server
// --listen ws://127.0.0.1:PORT` with approval_policy = "never",
// sandbox_mode = "workspace-write", the project trusted, model
// "fake-model" and model_provider "fake" = the small Responses server
// below. That server logs every request it gets as a {"dir":"model"} line
// (its tools' names, and its input items reduced by label) and answers by
// what the request asks: a review (its developer messages ask for the
// review's JSON answer) with a JSON review, a compaction (its last message
// asks for a summary) with a summary, anything else with "ok <n>". The
// project is a git repository (branch main, one commit, origin
// https://example.com/demo.git) with one uncommitted change. The client
// starts a thread, lists threads, runs a turn, lists (also with a
// searchTerm), reviews the uncommitted changes (review/start, inline),
// runs a turn, compacts, runs a turn, reads the thread; then starts a
// second thread whose config sets model_reasoning_effort, runs a turn and
// reads it. Paths were then rewritten to /home/dev/project (cwd) and
// /home/dev/.codex (CODEX_HOME), the commit id to 0123456789abcdef0123456789abcdef01234567.
// Usage: node review_context_capture.js ws://127.0.0.1:PORT MODELPORT CWD out.jsonl
const http = require('http');
const WebSocket = require('ws');
const fs = require('fs');
const [url, modelPort, cwd, outFile] = process.argv.slice(2);

const out = fs.createWriteStream(outFile);
const log = (dir, frame) => out.write(JSON.stringify({ dir, frame }) + '\n');

const REVIEW = JSON.stringify({
  findings: [{ title: '[P1] Divide by zero', body: 'b may be 0.', confidence_score: 0.8, priority: 1,
    code_location: { absolute_file_path: cwd + '/calc.py', line_range: { start: 2, end: 2 } } }],
  overall_correctness: 'patch is incorrect', overall_explanation: 'The change divides without a check.', overall_confidence_score: 0.8,
});
// label reduces a model input item to its role and what it is: the
// conversation's own texts verbatim, every other text (the server's
// instructions, its context and its prompts) by a label, so that none of
// the reference's wording is kept.
const SENT = ['hello there', 'fix the first finding', 'what next'];
function label(it) {
  const text = (it.content || []).map((c) => c.text || '').join('');
  let what = '[other]';
  if (it.role === 'developer') what = '[instructions]';
  else if (text.startsWith('<environment_context>')) what = '[environment context]';
  else if (SENT.includes(text) || /^ok \d+$/.test(text) || text === 'SUMMARY of the conversation so far.') what = text;
  else if (text.includes('The change divides without a check.')) what = it.role === 'user' ? '[review result]' : '[review]';
  else if (text.includes('SUMMARY of the conversation so far.')) what = '[summary]';
  else if (/summary/i.test(text)) what = '[compaction request]';
  else if (it.role === 'user' && /review/i.test(text)) what = '[review request]';
  return { type: it.type, role: it.role || null, text: what };
}
let n = 0;
function sse(res, text) {
  n++;
  const id = `resp_${n}`;
  res.writeHead(200, { 'content-type': 'text/event-stream' });
  const send = (type, body) => res.write(`event: ${type}\ndata: ${JSON.stringify({ type, ...body })}\n\n`);
  send('response.created', { response: { id } });
  const item = { type: 'message', role: 'assistant', id: `msg_${n}`, content: [{ type: 'output_text', text, annotations: [] }] };
  send('response.output_item.added', { output_index: 0, item });
  send('response.output_item.done', { output_index: 0, item });
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
    log('model', { tools: (b.tools || []).map((t) => t.name || t.type), input: (b.input || []).map(label) });
    const input = b.input || [];
    const devText = JSON.stringify(input.filter((m) => m.role === 'developer'));
    const last = JSON.stringify(input[input.length - 1] || {});
    if (/overall_correctness/.test(devText)) return sse(res, REVIEW);
    if (/summary/i.test(last)) return sse(res, 'SUMMARY of the conversation so far.');
    return sse(res, `ok ${n + 1}`);
  });
});
model.listen(Number(modelPort), '127.0.0.1');

const ws = new WebSocket(url);
const pending = {};
const notes = [];
let id = 0;
ws.on('message', (data) => {
  const f = JSON.parse(data.toString('utf8'));
  log('recv', f);
  if (f.id !== undefined && pending[f.id]) { pending[f.id](f); delete pending[f.id]; } else if (f.method) notes.push(f);
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
  const tid = (await call('thread/start', { cwd })).result.thread.id;
  await call('thread/list', { limit: 10 });
  await call('turn/start', { threadId: tid, input: text('hello there') });
  await turnDone();
  await call('thread/list', { limit: 10 });
  await call('thread/list', { limit: 10, searchTerm: 'hello' });
  await call('review/start', { threadId: tid, target: { type: 'uncommittedChanges' }, delivery: 'inline' });
  await turnDone();
  await call('turn/start', { threadId: tid, input: text('fix the first finding') });
  await turnDone();
  await call('thread/compact/start', { threadId: tid });
  await turnDone();
  await call('turn/start', { threadId: tid, input: text('what next') });
  await turnDone();
  await call('thread/read', { threadId: tid, includeTurns: true });
  // Thread fields: a thread whose config sets the reasoning effort.
  const t2 = (await call('thread/start', { cwd, config: { model_reasoning_effort: 'high' } })).result.thread.id;
  await call('turn/start', { threadId: t2, input: text('hello there') });
  await turnDone();
  await call('thread/read', { threadId: t2 });
  await new Promise((r) => setTimeout(r, 500));
  ws.close();
  out.end();
  model.close();
  process.exit(0);
});

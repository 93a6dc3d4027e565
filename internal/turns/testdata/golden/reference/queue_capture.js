// Capture of queue.jsonl: codex-cli 0.171.0 `codex app-server --listen
// ws://127.0.0.1:PORT` with a CODEX_HOME whose config.toml sets model
// "gpt-5.5", approval_policy "never" and model_provider "fake" =
// `appserver mockmodel --script queue_script.json` (wire_api "responses",
// no retries). The client (experimentalApi) starts a thread, adds an
// entry while the thread is idle (it starts at once), then starts a slow
// turn and, while it runs, adds entries (one with a client id used
// before), lists them in pages and with a bad cursor, reorders them (all,
// then a subset, then with an unknown id), updates two (one with empty
// metadata), and tries update, delete and start of unknown entries, a start
// while the turn runs, an unknown thread and empty input; then it waits
// for the queue to drain by itself, adds one more entry to the idle
// thread, tries thread/queue/start on the empty queue and reads the thread.
// Paths were rewritten to /home/dev/project (cwd) and /home/dev/.codex
// (CODEX_HOME), as in the other captures.
// Usage: node queue_capture.js ws://127.0.0.1:PORT CWD queue.jsonl
const WebSocket = require('ws');
const fs = require('fs');
const [url, cwd, outFile] = process.argv.slice(2);
const out = fs.createWriteStream(outFile);
const log = (dir, frame) => out.write(JSON.stringify({ dir, frame }) + '\n');
const ws = new WebSocket(url);
const recvd = [];
let waiter = null;
ws.on('message', (data) => { const f = JSON.parse(data.toString('utf8')); log('recv', f); recvd.push(f); if (waiter) waiter(); });
const resp = (id) => recvd.find((f) => f.id === id && (f.result !== undefined || f.error !== undefined));
async function waitFor(pred, max) { const deadline = Date.now() + max; while (!pred() && Date.now() < deadline) await new Promise((r) => { waiter = r; setTimeout(r, 50); }); }
let nid = 1;
async function call(method, params, max = 5000) { const id = nid++; log('send', { id, method, params }); ws.send(JSON.stringify({ id, method, params })); await waitFor(() => resp(id), max); return resp(id); }
const countMethod = (m) => recvd.filter((f) => f.method === m).length;
const text = (t) => [{ type: 'text', text: t, text_elements: [] }];
ws.on('open', async () => {
  await call('initialize', { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } });
  ws.send(JSON.stringify({ method: 'initialized' }));
  const tid = (await call('thread/start', { cwd })).result.thread.id;
  await call('thread/queue/list', { threadId: tid });
  // add while idle
  const a = await call('thread/queue/add', { threadId: tid, clientUserMessageId: 'client-a', input: text('queued while idle') });
  await waitFor(() => countMethod('turn/completed') >= 1, 8000);
  await call('thread/queue/list', { threadId: tid });
  // start a turn and queue while it runs
  const before = countMethod('turn/completed');
  await call('turn/start', { threadId: tid, input: text('running turn') });
  await waitFor(() => countMethod('turn/started') >= 1, 3000);
  const b = await call('thread/queue/add', { threadId: tid, clientUserMessageId: 'client-b', input: text('queued b') });
  const c = await call('thread/queue/add', { threadId: tid, clientUserMessageId: 'client-c', input: text('queued c'), responsesapiClientMetadata: { k: 'v' } });
  await call('thread/queue/add', { threadId: tid, clientUserMessageId: 'client-b', input: text('queued b again') });
  await call('thread/queue/list', { threadId: tid });
  await call('thread/queue/list', { threadId: tid, limit: 1 });
  const l1 = await call('thread/queue/list', { threadId: tid, limit: 1 });
  if (l1.result && l1.result.nextCursor) await call('thread/queue/list', { threadId: tid, limit: 1, cursor: l1.result.nextCursor });
  await call('thread/queue/list', { threadId: tid, cursor: 'bogus' });
  const ids = (await call('thread/queue/list', { threadId: tid })).result.data.map((q) => q.id);
  await call('thread/queue/reorder', { threadId: tid, queuedSubmissionIds: ids.slice().reverse() });
  await call('thread/queue/reorder', { threadId: tid, queuedSubmissionIds: ids.slice(0, 1) });
  await call('thread/queue/reorder', { threadId: tid, queuedSubmissionIds: [ids[0], 'no-such-id'] });
  await call('thread/queue/list', { threadId: tid });
  await call('thread/queue/update', { threadId: tid, queuedSubmissionId: b.result.queuedSubmission.id, input: text('queued b edited') });
  await call('thread/queue/update', { threadId: tid, queuedSubmissionId: c.result.queuedSubmission.id, input: text('queued c edited'), responsesapiClientMetadata: {} });
  await call('thread/queue/update', { threadId: tid, queuedSubmissionId: 'no-such-id', input: text('x') });
  await call('thread/queue/delete', { threadId: tid, queuedSubmissionId: 'no-such-id' });
  await call('thread/queue/start', { threadId: tid, queuedSubmissionId: 'no-such-id' });
  await call('thread/queue/start', { threadId: tid, queuedSubmissionId: b.result.queuedSubmission.id });
  await call('thread/queue/list', { threadId: tid });
  await call('thread/queue/list', { threadId: '00000000-0000-0000-0000-000000000000' });
  await call('thread/queue/add', { threadId: '00000000-0000-0000-0000-000000000000', clientUserMessageId: 'x', input: text('x') });
  await call('thread/queue/add', { threadId: tid, clientUserMessageId: 'client-e', input: [] });
  // wait for the running turn to end; does the next start by itself?
  await waitFor(() => countMethod('turn/completed') >= before + 3, 15000);
  await call('thread/queue/list', { threadId: tid });
  // queue/start with nothing while idle
  const d = await call('thread/queue/add', { threadId: tid, clientUserMessageId: 'client-d', input: text('queued d') });
  await waitFor(() => false, 3000);
  await call('thread/queue/list', { threadId: tid });
  await call('thread/queue/start', { threadId: tid });
  await waitFor(() => false, 3000);
  await call('thread/queue/delete', { threadId: tid, queuedSubmissionId: d.result.queuedSubmission.id });
  await call('thread/read', { threadId: tid, includeTurns: true });
  ws.close(); out.end();
});

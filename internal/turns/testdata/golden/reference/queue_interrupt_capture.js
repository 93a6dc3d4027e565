// Capture of queue_interrupt.jsonl: the set-up of queue_capture.js with
// queue_interrupt_script.json (one slow answer). The client starts a turn,
// queues two entries while it runs, interrupts it, waits, lists the queue
// (still there: an interrupted turn does not move it on) and starts the
// second entry with thread/queue/start.
// Usage: node queue_interrupt_capture.js ws://127.0.0.1:PORT CWD queue_interrupt.jsonl
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
  const t = await call('turn/start', { threadId: tid, input: text('running turn') });
  await waitFor(() => countMethod('turn/started') >= 1, 3000);
  const x = await call('thread/queue/add', { threadId: tid, clientUserMessageId: 'client-x', input: text('queued x') });
  const y = await call('thread/queue/add', { threadId: tid, clientUserMessageId: 'client-y', input: text('queued y') });
  await call('turn/interrupt', { threadId: tid, turnId: t.result.turn.id });
  await waitFor(() => countMethod('turn/completed') >= 1, 5000);
  await waitFor(() => false, 2500);
  await call('thread/queue/list', { threadId: tid });
  await call('thread/queue/start', { threadId: tid, queuedSubmissionId: y.result.queuedSubmission.id });
  await waitFor(() => countMethod('turn/completed') >= 3, 8000);
  await call('thread/queue/list', { threadId: tid });
  ws.close(); out.end();
});

// Capture of review_nogit.jsonl: codex-cli 0.171.0 `codex app-server
// --listen ws://127.0.0.1:PORT` with a CODEX_HOME whose config.toml sets
// model "fake-model" and model_provider "fake" = `appserver mockmodel
// --script review_script.json` (wire_api "responses"), and a cwd that is
// no git repository (a fresh directory holding notes.txt). The client
// sends initialize, thread/start, review/start on the uncommitted changes,
// waits for what follows, then thread/read.
// Usage: node review_nogit_capture.js ws://127.0.0.1:PORT CWD out.jsonl
const WebSocket = require('ws');
const fs = require('fs');
const [url, cwd, outFile] = process.argv.slice(2);
const out = fs.createWriteStream(outFile);
const log = (dir, frame) => out.write(JSON.stringify({ dir, frame }) + '\n');
const ws = new WebSocket(url);
const recvd = [];
let waiter = null;
ws.on('message', (data) => {
  const f = JSON.parse(data.toString('utf8'));
  log('recv', f);
  recvd.push(f);
  if (waiter) waiter();
});
const resp = (id) => recvd.find((f) => f.id === id && (f.result !== undefined || f.error !== undefined));
async function waitFor(pred, max) {
  const deadline = Date.now() + max;
  while (!pred() && Date.now() < deadline) await new Promise((r) => { waiter = r; setTimeout(r, 50); });
}
function send(f) { log('send', f); ws.send(JSON.stringify(f)); }
ws.on('open', async () => {
  send({ id: 1, method: 'initialize', params: { clientInfo: { name: 'codex-tui', title: null, version: '0.171.0' }, capabilities: { experimentalApi: true } } });
  await waitFor(() => resp(1), 5000);
  send({ method: 'initialized' });
  send({ id: 2, method: 'thread/start', params: { cwd } });
  await waitFor(() => resp(2), 10000);
  const tid = resp(2).result.thread.id;
  send({ id: 3, method: 'review/start', params: { threadId: tid, target: { type: 'uncommittedChanges' } } });
  await waitFor(() => resp(3), 10000);
  // Whatever the review does next: its turn's end, or nothing.
  await waitFor(() => recvd.some((f) => f.method === 'turn/completed'), 15000);
  send({ id: 4, method: 'thread/read', params: { threadId: tid, includeTurns: true } });
  await waitFor(() => resp(4), 5000);
  ws.close();
  out.end();
});

// Capture of tools_turns.jsonl: codex-cli 0.169.0 `codex app-server --listen
// ws://127.0.0.1:18764` with CODEX_HOME outside /tmp (so its sandbox helper
// works) and config model = "gpt-5.5" (a catalog model: unified_exec +
// freeform apply_patch), model_provider "fake" = `appserver mockmodel
// --script tools_script.json`, cwd /home/dev/project (not a git repo)
// holding notes.txt = "one\n". Turn 1: on-request + workspace-write; turn 2:
// untrusted, approvals accepted; turn 3: untrusted, command declined.
// Usage: node tools_capture.js ws://127.0.0.1:18764 out.jsonl
const WebSocket = require('ws');
const fs = require('fs');
const [url, outFile] = process.argv.slice(2);
const out = fs.createWriteStream(outFile);
const t0 = Date.now();
const log = (dir, frame) => out.write(JSON.stringify({ dir, t: Date.now() - t0, frame }) + '\n');
const ws = new WebSocket(url);
const recvd = [];
let waiter = null;
let declineNext = false;
ws.on('message', (data) => {
  const f = JSON.parse(data.toString('utf8'));
  log('recv', f);
  recvd.push(f);
  if (f.id !== undefined && f.method !== undefined) {
    let decision = 'accept';
    if (f.method === 'item/commandExecution/requestApproval' && declineNext) decision = 'decline';
    const reply = { id: f.id, result: { decision } };
    log('send', reply);
    ws.send(JSON.stringify(reply));
  }
  if (waiter) waiter();
});
const resp = (id) => recvd.find((f) => f.id === id && (f.result !== undefined || f.error !== undefined));
const count = (m) => recvd.filter((f) => f.method === m).length;
async function waitFor(pred, max) {
  const deadline = Date.now() + max;
  while (!pred() && Date.now() < deadline) await new Promise((r) => { waiter = r; setTimeout(r, 50); });
}
function send(f) { log('send', f); ws.send(JSON.stringify(f)); }
ws.on('open', async () => {
  send({ id: 'initialize', method: 'initialize', params: { clientInfo: { name: 'codex-tui', title: null, version: '0.169.0' }, capabilities: { experimentalApi: true } } });
  await waitFor(() => resp('initialize'), 5000);
  send({ method: 'initialized' });
  send({ id: 1, method: 'thread/start', params: { cwd: '/home/dev/project', sandbox: 'workspace-write', approvalPolicy: 'on-request' } });
  await waitFor(() => resp(1), 10000);
  const tid = resp(1).result.thread.id;
  send({ id: 2, method: 'turn/start', params: { threadId: tid, input: [{ type: 'text', text: 'Run the tools', text_elements: [] }] } });
  await waitFor(() => count('turn/completed') >= 1, 30000);
  send({ id: 3, method: 'turn/start', params: { threadId: tid, approvalPolicy: 'untrusted', input: [{ type: 'text', text: 'Ask first', text_elements: [] }] } });
  await waitFor(() => count('turn/completed') >= 2, 30000);
  declineNext = true;
  send({ id: 4, method: 'turn/start', params: { threadId: tid, input: [{ type: 'text', text: 'Decline this', text_elements: [] }] } });
  await waitFor(() => count('turn/completed') >= 3, 30000);
  send({ id: 5, method: 'thread/items/list', params: { threadId: tid } });
  await waitFor(() => resp(5), 5000);
  ws.close();
  out.end();
});

// Capture of nul_output.jsonl: codex-cli 0.171.0 `codex app-server
// --listen ws://127.0.0.1:PORT` with a CODEX_HOME whose config.toml sets
// model "fake-model" and model_provider "fake" = `appserver mockmodel
// --script` with a script whose first answer calls exec_command with
// `printf 'a\0b'` and whose second, once the call's output is back, is
// "done". The thread runs with danger-full-access and approval never.
// Usage: node nul_output_capture.js ws://127.0.0.1:PORT CWD out.jsonl
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
  send({ id: 2, method: 'thread/start', params: { cwd, sandbox: 'danger-full-access', approvalPolicy: 'never' } });
  await waitFor(() => resp(2), 10000);
  const tid = resp(2).result.thread.id;
  send({ id: 3, method: 'turn/start', params: { threadId: tid, input: [{ type: 'text', text: 'Print a NUL', text_elements: [] }] } });
  await waitFor(() => recvd.some((f) => f.method === 'turn/completed'), 30000);
  ws.close();
  out.end();
});

// Capture of accountinfo.jsonl: codex-cli 0.171.0 `codex app-server
// --listen ws://127.0.0.1:PORT`, started in SERVERCWD, with a fresh
// CODEX_HOME holding an API key (`codex login --with-api-key`) and a
// config.toml whose model "fake-model" is served by model_provider "fake"
// (base_url: `appserver mockmodel --script accountinfo_model.json`,
// env_key FAKE_KEY, set). CWD is an empty directory (not SERVERCWD) but
// for notes.log ("note\n"). The client runs the steps of
// accountinfo_script.json, with $CWD and $HOME replaced:
//   connect      opens a new connection (the last one closed) and
//                initializes it with the given capabilities;
//   call         sends one request (without params when the step has
//                none) and records its result or error, and the account/*
//                notifications that arrive up to 300 ms after the answer;
//                with zip, the entries of the zip file written;
//   startThread  thread/start with the params, its id then standing for
//                $THREAD;
//   turn         turn/start on that thread with the step's text, waits for
//                turn/completed and records, in order, the thread's token
//                usage and account/* notifications.
// The paths CODEX_HOME, CWD and SERVERCWD, the fake model's base URL and
// the thread's id were then rewritten to $HOME, $CWD, $SERVERCWD, $MODEL
// and $THREAD.
// internal/server/accountinfo_golden_e2e_test.go replays the same steps against
// appserver and compares.
// Usage: node accountinfo_capture.js ws://127.0.0.1:PORT CODEX_HOME CWD SERVERCWD MODEL_BASE_URL > accountinfo.jsonl
const WebSocket = require('ws');
const fs = require('fs');
const path = require('path');
const { execFileSync } = require('child_process');
const [url, home, cwd, serverCwd, modelURL] = process.argv.slice(2);
const steps = JSON.parse(fs.readFileSync(path.join(__dirname, 'accountinfo_script.json'), 'utf8')
  .split('$CWD').join(cwd).split('$HOME').join(home));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
let threadId = null;
const rewrite = (s) => {
  let out = s.split(modelURL).join('$MODEL').split(home).join('$HOME').split(cwd).join('$CWD').split(serverCwd).join('$SERVERCWD');
  if (threadId) out = out.split(threadId).join('$THREAD');
  return out;
};
const record = (o) => console.log(rewrite(JSON.stringify(o)));

function connect(caps) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url);
    const c = { ws, id: 0, pending: {}, notes: [] };
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString());
      if (f.id !== undefined && f.method === undefined && c.pending[f.id]) { c.pending[f.id](f); delete c.pending[f.id]; return; }
      if (f.method !== undefined) { delete f.emittedAtMs; c.notes.push(f); }
    });
    c.send = (method, params) => new Promise((r) => {
      const i = ++c.id;
      c.pending[i] = r;
      const frame = { id: i, method };
      if (params !== undefined) frame.params = params;
      ws.send(JSON.stringify(frame));
    });
    ws.on('open', async () => {
      await c.send('initialize', { clientInfo: { name: 'probe', title: null, version: '0' }, capabilities: caps });
      ws.send(JSON.stringify({ method: 'initialized' }));
      resolve(c);
    });
  });
}

const account = (n) => n.method.startsWith('account/');

(async () => {
  let c = null;
  for (const s of steps) {
    if (s.connect) {
      if (c) c.ws.close();
      c = await connect(s.connect);
    } else if (s.call) {
      const params = threadId && s.params ? JSON.parse(JSON.stringify(s.params).split('$THREAD').join(threadId)) : s.params;
      c.notes = [];
      const r = await c.send(s.call, params);
      await sleep(300);
      const line = { name: s.name, res: r.result ?? null, err: r.error ?? null, notes: c.notes.filter(account) };
      if (s.zip && r.result) line.zip = execFileSync('unzip', ['-Z1', s.zip]).toString().trim().split('\n');
      record(line);
    } else if (s.startThread) {
      const r = await c.send('thread/start', s.startThread);
      threadId = r.result.thread.id;
      record({ name: s.name, res: { threadId: r.result.thread.id }, err: r.error ?? null });
    } else if (s.turn) {
      c.notes = [];
      await c.send('turn/start', { threadId, input: [{ type: 'text', text: s.turn, text_elements: [] }] });
      for (let i = 0; i < 300 && !c.notes.some((n) => n.method === 'turn/completed'); i++) await sleep(100);
      const notes = c.notes.filter((n) => account(n) || n.method === 'thread/tokenUsage/updated')
        .map((n) => (account(n) ? n : { method: n.method }));
      record({ name: s.name, notes });
    }
  }
  c.ws.close();
  process.exit(0);
})();

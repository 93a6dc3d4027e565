// Capture of process.jsonl: codex-cli 0.171.0 `codex app-server --listen
// ws://127.0.0.1:PORT` with a fresh CODEX_HOME (config.toml: a custom
// provider "fake", no model needed). The client initializes with
// capabilities.experimentalApi and runs the steps of process_script.json,
// with $CWD replaced by an empty directory:
//   call        sends one request and records its result or error;
//   waitOutput  reads until the process's streamed stdout holds the text;
//   waitExit    reads until process/exited for the handle and records it,
//               with the process/outputDelta bytes it streamed (per stream,
//               decoded and joined) and whether a delta said capReached;
//   disconnect  closes the connection, then records the processes still
//               running (from /proc) whose command line holds one of the
//               strings, after up to 5 s;
//   connect     opens a new connection with the given capabilities.
// Strings longer than 256 bytes are recorded as {"bytes": length}. The
// paths of the working directory were then rewritten to $CWD.
// internal/server/process_golden_e2e_test.go replays the same steps against
// appserver and compares.
// Usage: node process_capture.js ws://127.0.0.1:PORT CWD > process.jsonl
const WebSocket = require('ws');
const fs = require('fs');
const path = require('path');
const [url, cwd] = process.argv.slice(2);
const steps = JSON.parse(fs.readFileSync(path.join(__dirname, 'process_script.json'), 'utf8')
  .split('$CWD').join(cwd));

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const summarize = (s) => (Buffer.byteLength(s) > 256 ? { bytes: Buffer.byteLength(s) } : s);
const record = (o) => console.log(JSON.stringify(o).split(cwd).join('$CWD'));

function connect(caps) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url);
    const c = { ws, id: 0, pending: {}, out: {}, capHit: {}, exited: {}, waiters: [] };
    const wake = () => { const w = c.waiters; c.waiters = []; w.forEach((f) => f()); };
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString());
      if (f.id !== undefined && c.pending[f.id]) { c.pending[f.id](f); delete c.pending[f.id]; return; }
      if (f.method === 'process/outputDelta') {
        const p = f.params;
        const o = (c.out[p.processHandle] = c.out[p.processHandle] || { stdout: '', stderr: '' });
        o[p.stream] += Buffer.from(p.deltaBase64, 'base64').toString('latin1');
        if (p.capReached) (c.capHit[p.processHandle] = c.capHit[p.processHandle] || {})[p.stream] = true;
      } else if (f.method === 'process/exited') {
        c.exited[f.params.processHandle] = f.params;
      }
      wake();
    });
    c.call = (method, params) => new Promise((r) => { const i = ++c.id; c.pending[i] = r; ws.send(JSON.stringify({ id: i, method, params })); });
    c.until = async (cond) => {
      const deadline = Date.now() + 20000;
      while (!cond()) {
        if (Date.now() > deadline) return false;
        await new Promise((r) => { c.waiters.push(r); setTimeout(r, 100); });
      }
      return true;
    };
    ws.on('open', async () => {
      await c.call('initialize', { clientInfo: { name: 'probe', title: null, version: '0' }, capabilities: caps });
      ws.send(JSON.stringify({ method: 'initialized' }));
      resolve(c);
    });
  });
}

function running(patterns) {
  const out = [];
  for (const pid of fs.readdirSync('/proc')) {
    if (!/^\d+$/.test(pid)) continue;
    let cmd;
    try { cmd = fs.readFileSync(`/proc/${pid}/cmdline`, 'latin1').split('\0').join(' ').trim(); } catch (e) { continue; }
    if (patterns.some((p) => cmd.includes(p))) out.push(cmd);
  }
  return out.sort();
}

(async () => {
  let c = await connect({ experimentalApi: true });
  for (const s of steps) {
    if (s.call) {
      const r = await c.call(s.call, s.params);
      record({ req: [s.call, s.params], res: r.result ?? null, err: r.error ?? null });
    } else if (s.waitOutput) {
      const ok = await c.until(() => ((c.out[s.waitOutput] || {}).stdout || '').includes(s.text));
      record({ waitOutput: s.waitOutput, text: s.text, ok });
    } else if (s.waitExit) {
      const h = s.waitExit;
      const ok = await c.until(() => c.exited[h]);
      const e = ok ? { ...c.exited[h] } : null;
      if (e) { e.stdout = summarize(e.stdout); e.stderr = summarize(e.stderr); }
      const o = c.out[h] || { stdout: '', stderr: '' };
      record({ waitExit: h, exited: e, streamed: { stdout: summarize(o.stdout), stderr: summarize(o.stderr) }, capReached: c.capHit[h] || {} });
      delete c.exited[h]; delete c.out[h]; delete c.capHit[h];
    } else if (s.disconnect) {
      c.ws.close();
      let left = running(s.disconnect);
      for (let i = 0; i < 50 && left.length > 0; i++) { await sleep(100); left = running(s.disconnect); }
      record({ disconnect: s.disconnect, running: left });
    } else if (s.connect) {
      c = await connect(s.connect);
      record({ connect: s.connect });
    }
  }
  c.ws.close();
  process.exit(0);
})();

// Capture of skills_write.jsonl: codex-cli 0.171.0 `codex app-server
// --listen ws://127.0.0.1:PORT` with a fresh CODEX_HOME whose config.toml
// sets a custom provider "fake" and trusts the project directory, signed in
// with an API key, HOME an empty directory. The extra root EXTRA holds one
// skill, demo/SKILL.md (name "demo"). Each line is one request of CALLS and
// the reference's answer (result or error); "exp" says whether the
// connection initialized with capabilities.experimentalApi. The project's
// and the extra root's paths are given on the command line and kept out of
// the file (its lines say CWD and EXTRA); skills/list answers keep only the
// skills of EXTRA, since the reference's bundled system skills are not ours.
// internal/server/skills_write_e2e_test.go replays the same requests.
// Usage: node skills_write_capture.js ws://127.0.0.1:PORT CWD EXTRA > skills_write.jsonl
const WebSocket = require('ws');
const CALLS = [
  ['skills/list', { cwds: ['CWD'] }],
  ['skills/extraRoots/set', { extraRoots: ['EXTRA'] }],
  ['skills/list', { cwds: ['CWD'] }],
  ['skills/list', { cwds: ['CWD'], forceReload: true }],
  ['skills/config/write', { name: 'demo', enabled: false }],
  ['skills/list', { cwds: ['CWD'] }],
  ['skills/config/write', { path: 'EXTRA/demo/SKILL.md', enabled: true }],
  ['skills/list', { cwds: ['CWD'] }],
  ['skills/config/write', { name: 'nope', enabled: false }],
  ['skills/config/write', { enabled: true }],
  ['skills/config/write', { name: 'demo', path: 'EXTRA/demo/SKILL.md', enabled: true }],
  ['skills/config/write', { path: 'relative/SKILL.md', enabled: true }],
  ['skills/config/write', { name: 'demo' }],
  ['skills/extraRoots/set', { extraRoots: ['relative'] }],
  ['skills/extraRoots/set', { extraRoots: ['EXTRA/missing'] }],
  ['skills/extraRoots/set', {}],
  ['skills/extraRoots/set', { extraRoots: [] }],
  ['skills/list', { cwds: ['CWD'] }],
];
const STABLE_CALLS = [
  ['skills/extraRoots/set', { extraRoots: [] }],
  ['skills/config/write', { name: 'demo', enabled: true }],
];

function session(url, exp) {
  return new Promise((resolve) => {
    const ws = new WebSocket(url);
    let id = 0;
    const pending = {};
    ws.on('message', (d) => {
      const f = JSON.parse(d.toString());
      if (f.id !== undefined && pending[f.id]) { pending[f.id](f); delete pending[f.id]; }
    });
    const call = (method, params) => new Promise((r) => {
      const i = ++id;
      pending[i] = r;
      ws.send(JSON.stringify({ id: i, method, params }));
    });
    ws.on('open', async () => {
      await call('initialize', { clientInfo: { name: 'probe', title: null, version: '0' }, capabilities: { experimentalApi: exp } });
      ws.send(JSON.stringify({ method: 'initialized' }));
      resolve({ ws, call });
    });
  });
}

(async () => {
  const [url, cwd, extra] = process.argv.slice(2);
  const sub = (v) => JSON.parse(JSON.stringify(v).replaceAll('"CWD"', JSON.stringify(cwd)).replaceAll('EXTRA', extra));
  const unsub = (v) => JSON.parse(JSON.stringify(v).replaceAll(extra, 'EXTRA').replaceAll(cwd, 'CWD'));
  for (const [exp, calls] of [[true, CALLS], [false, STABLE_CALLS]]) {
    const s = await session(url, exp);
    for (const c of calls) {
      const r = await s.call(c[0], sub(c[1]));
      let res = r.result ?? null;
      if (c[0] === 'skills/list' && res) {
        for (const e of res.data) e.skills = e.skills.filter((k) => k.path.startsWith(extra));
      }
      console.log(JSON.stringify(unsub({ exp, req: c, res, err: r.error ?? null })));
    }
    s.ws.close();
  }
  process.exit(0);
})();

// Capture of externalagent.jsonl: codex-cli 0.171.0 `codex app-server
// --listen ws://127.0.0.1:PORT` with a fresh CODEX_HOME (a custom provider
// "fake"), signed in with an API key, HOME a directory without the other
// agent's files. The script lays out projects under DIR (an empty
// directory): "repo", a git repository with CLAUDE.md at its top and a
// subdirectory "sub"; "plain", no repository, with .claude/CLAUDE.md;
// "done", whose AGENTS.md has text already; "blank", whose AGENTS.md is
// blank. It asks externalAgentConfig/detect about them, imports what was
// detected (and a few malformed items), and records each answer, the
// notifications of each import (lines with "note"), and the AGENTS.md
// files afterwards (lines with "file"). Paths under DIR are written as
// DIR. internal/server/externalagent_e2e_test.go replays the same requests.
// Usage: node externalagent_capture.js ws://127.0.0.1:PORT DIR > externalagent.jsonl
const WebSocket = require('ws');
const fs = require('fs');
const path = require('path');
const dir = process.argv[3];

const CLAUDE = '# Rules for Claude\n\nClaude Code reads CLAUDE.md; claude-code and claude_code too.\nNot claudeX, not myclaude, not CLAUDE_MD.\n';
function layout() {
  fs.mkdirSync(path.join(dir, 'repo', '.git'), { recursive: true });
  fs.mkdirSync(path.join(dir, 'repo', 'sub'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'repo', 'CLAUDE.md'), CLAUDE);
  fs.mkdirSync(path.join(dir, 'plain', '.claude'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'plain', '.claude', 'CLAUDE.md'), 'Use claude.\n');
  fs.mkdirSync(path.join(dir, 'done'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'done', 'CLAUDE.md'), 'x\n');
  fs.writeFileSync(path.join(dir, 'done', 'AGENTS.md'), 'kept\n');
  fs.mkdirSync(path.join(dir, 'blank'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'blank', 'CLAUDE.md'), 'claude rules\n');
  fs.writeFileSync(path.join(dir, 'blank', 'AGENTS.md'), '  \n');
  fs.mkdirSync(path.join(dir, 'empty'), { recursive: true });
  fs.writeFileSync(path.join(dir, 'empty', 'CLAUDE.md'), '\n');
}

const D = (p) => 'DIR/' + p;
const CALLS = [
  ['externalAgentConfig/detect', {}],
  ['externalAgentConfig/detect', { cwds: [D('repo/sub'), D('plain'), D('done'), D('blank'), D('empty'), 'relative/dir', D('missing')] }],
  ['externalAgentConfig/detect', { cwds: [D('repo/CLAUDE.md')] }],
  ['externalAgentConfig/detect', null],
  ['externalAgentConfig/import', {}],
  ['externalAgentConfig/import', { migrationItems: [] }],
  ['externalAgentConfig/import', { migrationItems: [{ itemType: 'BOGUS', description: 'x' }] }],
  ['externalAgentConfig/import', { migrationItems: [{ itemType: 'MEMORY', description: 'x', cwd: null }] }],
  ['externalAgentConfig/import', { migrationItems: [{ itemType: 'AGENTS_MD', description: 'x', cwd: D('missing') }] }],
  ['externalAgentConfig/import', { migrationItems: [
    { itemType: 'AGENTS_MD', description: 'not what detect said', cwd: D('repo/sub') },
    { itemType: 'AGENTS_MD', description: 'x', cwd: D('plain') },
    { itemType: 'AGENTS_MD', description: 'x', cwd: D('done') },
    { itemType: 'AGENTS_MD', description: 'x', cwd: D('blank') },
  ] }],
  ['externalAgentConfig/detect', { cwds: [D('repo'), D('plain'), D('blank')] }],
];
const FILES = ['repo/AGENTS.md', 'plain/AGENTS.md', 'done/AGENTS.md', 'blank/AGENTS.md', 'repo/sub/AGENTS.md', 'plain/.claude/AGENTS.md'];

const subst = (v) => JSON.parse(JSON.stringify(v).split('DIR/').join(dir + '/'));
const unsubst = (v) => JSON.parse(JSON.stringify(v).split(dir + '/').join('DIR/').split(JSON.stringify(dir).slice(1, -1)).join('DIR'));

(async () => {
  layout();
  const ws = new WebSocket(process.argv[2]);
  let id = 0;
  const pending = {};
  let notes = [];
  ws.on('message', (d) => {
    const f = JSON.parse(d.toString());
    if (f.id !== undefined && pending[f.id]) { pending[f.id](f); delete pending[f.id]; }
    else if (f.method && f.method.startsWith('externalAgentConfig/')) notes.push(f);
  });
  const call = (method, params) => new Promise((r) => {
    const i = ++id;
    pending[i] = r;
    const frame = { id: i, method };
    if (params !== null) frame.params = params;
    ws.send(JSON.stringify(frame));
  });
  await new Promise((r) => ws.on('open', r));
  await call('initialize', { clientInfo: { name: 'probe', title: null, version: '0' }, capabilities: { experimentalApi: false } });
  ws.send(JSON.stringify({ method: 'initialized' }));
  for (const c of CALLS) {
    notes = [];
    const r = await call(c[0], c[1] === null ? null : subst(c[1]));
    let res = r.result ?? null;
    if (res && res.importId) {
      await new Promise((done) => setTimeout(done, 500));
      const importId = res.importId;
      res = { importId: 'ID' };
      for (const n of notes) {
        if (n.params.importId !== importId) continue;
        console.log(JSON.stringify({ note: n.method, params: unsubst({ ...n.params, importId: 'ID' }) }));
      }
    }
    console.log(JSON.stringify({ exp: false, req: c, res: unsubst(res), err: r.error ? unsubst(r.error) : null }));
  }
  for (const f of FILES) {
    const p = path.join(dir, f);
    console.log(JSON.stringify({ file: f, text: fs.existsSync(p) ? fs.readFileSync(p, 'utf8') : null }));
  }
  ws.close();
  process.exit(0);
})();

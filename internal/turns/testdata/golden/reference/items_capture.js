// Capture of items_calls.jsonl: codex-cli 0.171.0 `codex app-server --listen
// ws://127.0.0.1:PORT` with a fresh CODEX_HOME whose config.toml has
// model_provider "fake" = `appserver mockmodel --script items_model.json`
// (wire_api "responses", no retries). The client initializes with
// capabilities.experimentalApi, starts a paginated thread in an empty
// directory, runs three turns and then calls the methods of thread items
// and history: thread/items/read, thread/searchOccurrences,
// thread/readState/update, thread/search/stream with its cancel, and
// thread/revert (idle and while a turn runs). Each call is recorded with
// its result or error and the notifications of the families it concerns
// that arrived meanwhile. Ids the reference generates (threads, turns,
// items, revisions, cursors, times) are replaced by stable names in order
// of appearance ($id1, ..., $revision1, $turncursor1, ...), rollout paths by
// $PATH and the directory by $CWD.
// internal/turns/items_golden_e2e_test.go replays the same calls against
// appserver and compares.
// Usage: node items_capture.js ws://127.0.0.1:PORT CWD > items_calls.jsonl
const WebSocket = require('ws');
const [url, cwd] = process.argv.slice(2);
const ws = new WebSocket(url);
let id = 0;
const pending = {};
const notes = [];
let waiters = [];
ws.on('message', (d) => {
  const f = JSON.parse(d.toString());
  if (f.id !== undefined && f.method === undefined && pending[f.id]) { pending[f.id](f); delete pending[f.id]; return; }
  if (f.method) notes.push(f);
  const w = waiters; waiters = []; w.forEach((r) => r());
});
const call = (method, params) => new Promise((r) => { const i = ++id; pending[i] = r; ws.send(JSON.stringify({ id: i, method, params })); });
const until = async (cond, ms = 20000) => {
  const deadline = Date.now() + ms;
  while (!cond()) { if (Date.now() > deadline) return false; await new Promise((r) => { waiters.push(r); setTimeout(r, 50); }); }
  return true;
};
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
const family = /^thread\/(reverted|readState|search)/;
const out = [];
const rec = (o) => out.push(o);
const take = () => { const n = notes.filter((f) => family.test(f.method)); notes.length = 0; return n; };
async function turn(threadId, text) {
  notes.length = 0;
  const r = await call('turn/start', { threadId, input: [{ type: 'text', text, text_elements: [] }] });
  await until(() => notes.some((f) => f.method === 'turn/completed'));
  notes.length = 0;
  return r.result.turn.id;
}
async function step(method, params) {
  const r = await call(method, params);
  await sleep(300);
  rec({ req: [method, params], res: r.result ?? null, err: r.error ?? null, notes: take() });
  return r;
}
ws.on('open', async () => {
  await call('initialize', { clientInfo: { name: 'probe', title: null, version: '0' }, capabilities: { experimentalApi: true } });
  ws.send(JSON.stringify({ method: 'initialized' }));
  const st = await call('thread/start', { cwd, historyMode: 'paginated' });
  const th = st.result.thread.id;
  const t1 = await turn(th, 'First question about apples');
  const t2 = await turn(th, 'Second question about pears');
  const t3 = await turn(th, 'Third question about plums');
  const items = (await call('thread/items/list', { threadId: th, sortDirection: 'asc' })).result.data;
  rec({ req: ['thread/items/list', { threadId: th, sortDirection: 'asc' }], res: { data: items }, err: null, notes: [] });
  const of = (t) => items.filter((e) => e.turnId === t).map((e) => e.item.id);
  const i1 = of(t1), i2 = of(t2);
  await step('thread/items/read', { threadId: th, turnId: t1, itemIds: [...i1].reverse() });
  await step('thread/items/read', { threadId: th, turnId: t1, itemIds: [i1[1], 'no-such-item', i1[1]] });
  await step('thread/items/read', { threadId: th, turnId: t1, itemIds: [i2[0]] });
  await step('thread/items/read', { threadId: th, turnId: 'no-such-turn', itemIds: [i1[0]] });
  await step('thread/items/read', { threadId: th, turnId: t1, itemIds: [] });
  await step('thread/items/read', { threadId: th, turnId: t1, itemIds: Array.from({ length: 101 }, (_, k) => 'x' + k) });
  await step('thread/items/read', { threadId: 'not-a-thread', turnId: t1, itemIds: [i1[0]] });
  await step('thread/items/read', { threadId: '00000000-0000-7000-8000-000000000000', turnId: t1, itemIds: [i1[0]] });
  await step('thread/searchOccurrences', { threadId: th, searchTerm: 'APPLES' });
  const o1 = await step('thread/searchOccurrences', { threadId: th, searchTerm: 'apples', limit: 1 });
  if (o1.result && o1.result.nextCursor) await step('thread/searchOccurrences', { threadId: th, searchTerm: 'apples', limit: 1, cursor: o1.result.nextCursor });
  await step('thread/searchOccurrences', { threadId: th, searchTerm: 'apples', cursor: 'garbage' });
  await step('thread/searchOccurrences', { threadId: th, searchTerm: '' });
  await step('thread/searchOccurrences', { threadId: th, searchTerm: '   ' });
  await step('thread/searchOccurrences', { threadId: th, searchTerm: 'nothing-matches-this' });
  await step('thread/searchOccurrences', { threadId: th, searchTerm: 'a', limit: 0 });
  await step('thread/searchOccurrences', { threadId: '00000000-0000-7000-8000-000000000000', searchTerm: 'a' });
  const rd = await step('thread/read', { threadId: th });
  const rev = rd.result && rd.result.readState ? rd.result.readState.revision : 'none';
  const lst = await call('thread/list', {});
  rec({ req: ['thread/list', {}], res: { readStates: lst.result.readStates ?? null }, err: lst.error ?? null, notes: take() });
  await step('thread/readState/update', { threadId: th, expectedRevision: 'stale', operation: { type: 'read' } });
  const u1 = await step('thread/readState/update', { threadId: th, expectedRevision: rev, operation: { type: 'read' } });
  const rev2 = u1.result ? u1.result.readState.revision : rev;
  const u2 = await step('thread/readState/update', { threadId: th, expectedRevision: rev2, operation: { type: 'unread' } });
  const rev3 = u2.result ? u2.result.readState.revision : rev2;
  await step('thread/readState/update', { threadId: th, expectedRevision: rev3, operation: { type: 'bogus' } });
  await step('thread/readState/update', { threadId: '00000000-0000-7000-8000-000000000000', expectedRevision: rev3, operation: { type: 'read' } });
  await step('thread/read', { threadId: th });
  await step('thread/search/stream', { searchTerm: 'apples' });
  await step('thread/search/stream', { searchTerm: 'nothing-matches-this' });
  await step('thread/search/stream', { searchTerm: '' });
  await step('thread/search/stream', { searchTerm: 'x'.repeat(65537) });
  await step('thread/search', { searchTerm: 'apples' });
  await step('thread/search/stream/cancel', { requestId: 9999 });
  await step('thread/search/cancel', { requestId: 'nope' });
  // cancel a running stream at once
  {
    const i = ++id; const p = new Promise((r) => { pending[i] = r; });
    ws.send(JSON.stringify({ id: i, method: 'thread/search/stream', params: { searchTerm: 'plums' } }));
    const c = await call('thread/search/stream/cancel', { requestId: i });
    const r = await p; await sleep(300);
    rec({ req: ['thread/search/stream+cancel', { searchTerm: 'plums' }], cancel: c.result ?? c.error, res: r.result ?? null, err: r.error ?? null, notes: take() });
  }
  await step('thread/revert', { threadId: th, beforeTurnId: 'no-such-turn' });
  await step('thread/revert', { threadId: '00000000-0000-7000-8000-000000000000', beforeTurnId: t2 });
  await step('thread/revert', { threadId: th, beforeTurnId: t2 });
  await step('thread/turns/list', { threadId: th, sortDirection: 'asc' });
  await step('thread/items/read', { threadId: th, turnId: t2, itemIds: i2 });
  await step('thread/searchOccurrences', { threadId: th, searchTerm: 'apples' });
  const t4 = await turn(th, 'After revert one');
  rec({ turn: 'After revert one' });
  await step('thread/turns/list', { threadId: th, sortDirection: 'asc' });
  await step('thread/revert', { threadId: th, beforeTurnId: t1 });
  await step('thread/turns/list', { threadId: th, sortDirection: 'asc' });
  // revert while a turn runs
  notes.length = 0;
  const s = await call('turn/start', { threadId: th, input: [{ type: 'text', text: 'Slow question', text_elements: [] }] });
  await sleep(300);
  await step('thread/revert', { threadId: th, beforeTurnId: s.result.turn.id });
  await until(() => notes.some((f) => f.method === 'turn/completed'));
  await step('thread/turns/list', { threadId: th, sortDirection: 'asc' });
  // a legacy thread
  const lg = await call('thread/start', { cwd });
  const lt = await turn(lg.result.thread.id, 'After revert two');
  await step('thread/revert', { threadId: lg.result.thread.id, beforeTurnId: lt });
  await step('thread/searchOccurrences', { threadId: lg.result.thread.id, searchTerm: 'revert' });
  await step('thread/items/read', { threadId: lg.result.thread.id, turnId: lt, itemIds: ['x'] });
  // long messages: the snippet window, several matches in one message, UTF-16 ranges
  const lm = await call('thread/start', { cwd });
  await turn(lm.result.thread.id, 'Long 🍎 ' + 'x'.repeat(300) + ' needle ' + 'y'.repeat(300) + ' needle NEEDLE 🍎 needle');
  await step('thread/searchOccurrences', { threadId: lm.result.thread.id, searchTerm: 'needle' });
  await step('thread/searchOccurrences', { threadId: lm.result.thread.id, searchTerm: '🍎' });
  // anonymise
  const names = new Map(); const counts = {};
  const name = (kind, v) => { if (!names.has(v)) { counts[kind] = (counts[kind] || 0) + 1; names.set(v, `$${kind}${counts[kind]}`); } return names.get(v); };
  const uuid = /[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}/g;
  const walk = (v, key) => {
    if (Array.isArray(v)) return v.map((x) => walk(x, key));
    if (v && typeof v === 'object') { const o = {}; for (const [k, x] of Object.entries(v)) o[walk(k)] = walk(x, k); return o; }
    if (typeof v === 'number' && /At(Ms)?$|^(createdAt|updatedAt|recencyAt|durationMs)$/.test(key || '')) return 0;
    if (typeof v !== 'string') return v;
    if (key === 'path') return '$PATH';
    if (/[Cc]ursor$|^revision$|^expectedRevision$/.test(key || '') && v.length > 8) return name(key.replace(/^expected/, '').toLowerCase(), v);
    if (v.length > 300) return { bytes: Buffer.byteLength(v) };
    return v.split(cwd).join('$CWD').replace(uuid, (u) => name('id', u));
  };
  for (const o of out) console.log(JSON.stringify(walk(o)));
  ws.close();
  process.exit(0);
});

// node --test apps-script/: the trigger management of both kinds of project, run unmodified
// on the Node runtime (runtime/gas.js, runtime/execution.js, runtime/project.js): the
// standalone project's installSheetqTrigger and uninstallSheetqTrigger, and the bound
// project's onEdit telling the owner of a trigger an earlier version installed there how to
// remove it. The project's triggers and script properties live in a temp dir; the little the
// standalone install reads of the spreadsheet (can it be opened, is its queue protected and
// may the installer write it) is served by a stand-in Sheets API (fakeSheetsApi). A press,
// which reads and writes the spreadsheet, is run against the emulator by
// tests/it/apps_script.rs.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { Worker } = require('node:worker_threads');
const { runtime } = require('./runtime/gas.js');
const { createProject } = require('./runtime/project.js');
const { execute } = require('./runtime/execution.js');

const SPREADSHEET = 'sheet-1';
const OWNER = 'owner@example.com';
const ADMIN = 'admin@example.com';
const ALICE = 'alice@example.com';

/**
 * A Sheets API serving `spreadsheets` (id → { queue }: null for a spreadsheet without
 * `_ジョブキュー`, else { protections: [{ editors, warningOnly }] }, each a protection of the
 * whole sheet) to `GET /v4/spreadsheets/ID`, whoever asks, with `requestingUserCanEdit` for
 * the editors (the bearer token here is the e-mail itself); 404 for any other id. It runs in a
 * worker thread: the runtime's requests are synchronous and block this one.
 */
async function fakeSheetsApi(spreadsheets) {
  const code = `
    const { parentPort, workerData } = require('node:worker_threads');
    const http = require('node:http');
    const server = http.createServer((req, res) => {
      const who = String(req.headers.authorization || '').replace(/^Bearer /, '');
      const m = /^\\/v4\\/spreadsheets\\/([^/?:]+)/.exec(req.url);
      const id = m === null ? '' : decodeURIComponent(m[1]);
      const ss = workerData[id];
      res.setHeader('content-type', 'application/json');
      if (req.method !== 'GET' || ss === undefined) {
        res.statusCode = 404;
        res.end(JSON.stringify({ error: { code: 404, message: 'Requested entity was not found.' } }));
        return;
      }
      const sheets = ss.queue === null ? [] : [{
        properties: { sheetId: 7, title: '_ジョブキュー', index: 0 },
        protectedRanges: ss.queue.protections.map((p, i) => ({
          protectedRangeId: i + 1, range: { sheetId: 7 }, warningOnly: p.warningOnly === true,
          requestingUserCanEdit: p.warningOnly === true || p.editors.includes(who),
        })),
      }];
      res.end(JSON.stringify({ spreadsheetId: id, properties: { timeZone: 'Asia/Tokyo' }, sheets }));
    });
    server.listen(0, '127.0.0.1', () => parentPort.postMessage(server.address().port));`;
  const worker = new Worker(code, { eval: true, workerData: spreadsheets });
  const port = await new Promise((resolve, reject) => {
    worker.once('message', resolve);
    worker.once('error', reject);
  });
  return { apiBase: 'http://127.0.0.1:' + port + '/v4', close: () => worker.terminate() };
}

/** The owner's spreadsheet as `sheetq init` leaves it: the queue protected, owner and admin its editors. */
const PROTECTED = { queue: { protections: [{ editors: [OWNER, ADMIN] }] } };

let api;
test.before(async () => {
  api = await fakeSheetsApi({
    [SPREADSHEET]: PROTECTED,
    'sheet-2': PROTECTED,
    'open-sheet': { queue: { protections: [] } },
    'warned-sheet': { queue: { protections: [{ editors: [], warningOnly: true }] } },
    'no-queue': { queue: null },
  });
});
test.after(() => api.close());

function tempDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'sheetq-gas-'));
}

/** The owner's standalone project, its SHEETQ_SPREADSHEET_ID set to `spreadsheetId` unless undefined. */
function standalone(spreadsheetId) {
  const store = createProject(tempDir(), { kind: 'standalone', owner: OWNER });
  if (spreadsheetId !== undefined) store.setProperties({ SHEETQ_SPREADSHEET_ID: spreadsheetId });
  return store;
}

/** A run from the project's script editor by `who`. */
function fromEditor(store, who, fn) {
  const gas = runtime({
    apiBase: api.apiBase, token: who, effectiveUser: who, activeUser: who, authorized: true, project: store,
  });
  return execute(gas, fn, undefined, who);
}

function triggersOf(store) {
  return store.triggers().map(({ owner, handler, eventType, sourceId }) => ({ owner, handler, eventType, sourceId }));
}

test('the standalone install refuses without SHEETQ_SPREADSHEET_ID, saying where to set it', () => {
  for (const value of [undefined, '', '   ']) {
    const store = standalone(value);
    const run = fromEditor(store, OWNER, 'installSheetqTrigger');
    assert.equal(run.ran, true);
    assert.match(String(run.error), /スクリプト プロパティ SHEETQ_SPREADSHEET_ID がありません/, `value ${value}`);
    assert.match(String(run.error), /プロジェクトの設定」（Project Settings）→「スクリプト プロパティ」（Script properties）/,
      'names where the owner sets it');
    assert.deepEqual(store.triggers(), [], 'nothing is installed');
    assert.equal(store.properties().SHEETQ_TRIGGER_OWNER, undefined, 'nothing is recorded');
  }
  const junk = fromEditor(standalone('not an id!'), OWNER, 'installSheetqTrigger');
  assert.match(String(junk.error), /SHEETQ_SPREADSHEET_ID の値 "not an id!" はスプレッドシートの ID ではありません/);
});

test('the standalone install refuses a spreadsheet it cannot open, naming it', () => {
  const store = standalone('gone-sheet');
  const run = fromEditor(store, OWNER, 'installSheetqTrigger');
  assert.match(String(run.error), /スプレッドシート gone-sheet（SHEETQ_SPREADSHEET_ID）を owner@example\.com の権限で開けません/);
  assert.match(String(run.error), /Requested entity was not found/, 'with what Google said');
  assert.deepEqual(store.triggers(), []);
});

test('installSheetqTrigger installs one edit trigger for the named spreadsheet, owned by whoever runs it, and never a second', () => {
  // The spreadsheet's URL, pasted whole, names it too.
  const store = standalone('https://docs.google.com/spreadsheets/d/' + SPREADSHEET + '/edit#gid=0');
  const first = fromEditor(store, OWNER, 'installSheetqTrigger');
  assert.equal(first.error, null, first.error);
  assert.equal(first.project, 'standalone');
  assert.deepEqual(triggersOf(store),
    [{ owner: OWNER, handler: 'onSheetqEdit', eventType: 'ON_EDIT', sourceId: SPREADSHEET }]);
  assert.equal(store.properties().SHEETQ_TRIGGER_OWNER, OWNER, 'the owner is recorded');
  assert.match(first.logs.join('\n'), /トリガーを入れました/);

  const second = fromEditor(store, OWNER, 'installSheetqTrigger');
  assert.equal(second.error, null, second.error);
  assert.equal(store.triggers().length, 1, 'running it again installs nothing more');
  assert.match(second.logs.join('\n'), /既にあります/);
});

test('a second account cannot install beside the first: it is refused, naming the owner', () => {
  // The owner has shared the standalone project with an admin, who edits the queue's protection too.
  const store = standalone(SPREADSHEET);
  fromEditor(store, OWNER, 'installSheetqTrigger');
  const other = fromEditor(store, ADMIN, 'installSheetqTrigger');
  assert.match(String(other.error), /owner@example\.com が入れています/);
  assert.equal(store.triggers().length, 1, 'no trigger of the second account');
  assert.equal(store.properties().SHEETQ_TRIGGER_OWNER, OWNER);

  const theirs = fromEditor(store, ADMIN, 'uninstallSheetqTrigger');
  assert.equal(theirs.error, null, theirs.error);
  assert.equal(store.triggers().length, 1, 'no one removes another account\'s trigger');
  assert.equal(store.properties().SHEETQ_TRIGGER_OWNER, OWNER);

  fromEditor(store, OWNER, 'uninstallSheetqTrigger');
  assert.deepEqual(store.triggers(), [], 'its owner removes it');
  assert.equal(store.properties().SHEETQ_TRIGGER_OWNER, undefined, 'and the record with it');
  const handover = fromEditor(store, ADMIN, 'installSheetqTrigger');
  assert.equal(handover.error, null, handover.error);
  assert.deepEqual(store.triggers().map((t) => t.owner), [ADMIN]);
});

test('the standalone install refuses a queue that is missing, unprotected, or not the installer\'s to write', () => {
  const cases = [
    ['no-queue', OWNER, /_ジョブキュー がありません。先に `sheetq init`/],
    ['open-sheet', OWNER, /_ジョブキュー が保護されていません/],
    ['warned-sheet', OWNER, /警告のみの保護は保護ではありません/],
    [SPREADSHEET, ALICE, /alice@example\.com は _ジョブキュー の保護範囲の編集者ではない/],
  ];
  for (const [id, who, refused] of cases) {
    const store = standalone(id);
    const run = fromEditor(store, who, 'installSheetqTrigger');
    assert.match(String(run.error), refused, `${who} on ${id}`);
    assert.deepEqual(store.triggers(), [], `nothing is installed for ${who} on ${id}`);
    assert.equal(store.properties().SHEETQ_TRIGGER_OWNER, undefined);
  }
});

test('a standalone project serves one spreadsheet: pointed at another, its install is refused until uninstalled', () => {
  const store = standalone(SPREADSHEET);
  fromEditor(store, OWNER, 'installSheetqTrigger');
  store.setProperties({ ...store.properties(), SHEETQ_SPREADSHEET_ID: 'sheet-2' });
  const moved = fromEditor(store, OWNER, 'installSheetqTrigger');
  assert.match(String(moved.error), /スプレッドシート sheet-1 のものです/);
  assert.deepEqual(triggersOf(store).map((t) => t.sourceId), [SPREADSHEET]);
  fromEditor(store, OWNER, 'uninstallSheetqTrigger');
  const again = fromEditor(store, OWNER, 'installSheetqTrigger');
  assert.equal(again.error, null, again.error);
  assert.deepEqual(triggersOf(store).map((t) => t.sourceId), ['sheet-2']);
});

/**
 * An edit event whose range notes whether the script looked at it: A1:B2, which holds no
 * box, so the script has nothing to read past where it is; its source records toasts.
 */
function watchedEdit(user) {
  const seen = { touched: false, toasts: [] };
  const where = { getRow: 1, getColumn: 1, getNumRows: 2, getNumColumns: 2 };
  const range = new Proxy({}, {
    get(_, name) {
      seen.touched = true;
      if (name in where) return () => where[name];
      return () => assert.fail('the script read an edit that holds no box: ' + String(name));
    },
  });
  const source = { toast: (message) => { seen.toasts.push(String(message)); } };
  return { seen, e: { range, source, user: { getEmail: () => user } } };
}

/** The bound project of SPREADSHEET, holding the shipped Code.js. */
function bound() {
  return createProject(tempDir(), { kind: 'bound', owner: OWNER, container: SPREADSHEET });
}

function simpleRun(store, who, e) {
  const gas = runtime({
    apiBase: api.apiBase, token: who, effectiveUser: who, activeUser: who, authorized: false, project: store,
  });
  return execute(gas, 'onEdit', e, who);
}

test('the bound project has no installable trigger any more: nothing there to install or to handle', () => {
  const store = bound();
  const run = fromEditor(store, OWNER, 'installSheetqTrigger');
  assert.equal(run.ran, false, 'no installSheetqTrigger in the bound project');
  assert.deepEqual(store.triggers(), []);
  for (const fn of ['onSheetqEdit', 'uninstallSheetqTrigger']) {
    assert.equal(fromEditor(store, OWNER, fn).ran, false, `no ${fn} in the bound project`);
  }
});

test('while the bound project records an earlier installable trigger, onEdit logs how to remove it and tells its owner', () => {
  const store = bound();
  const quiet = watchedEdit(OWNER);
  const before = simpleRun(store, OWNER, quiet.e);
  assert.equal(before.error, null, before.error);
  assert.deepEqual([quiet.seen.toasts, before.logs], [[], []], 'no record, nothing said');
  assert.equal(quiet.seen.touched, true, 'and the edit is looked at as ever');

  store.setProperties({ SHEETQ_TRIGGER_OWNER: OWNER });
  const owners = watchedEdit(OWNER);
  const run = simpleRun(store, OWNER, owners.e);
  assert.equal(run.error, null, run.error);
  const [told] = owners.seen.toasts;
  assert.equal(owners.seen.toasts.length, 1, 'the owner is told once');
  for (const step of [/「トリガー」（Triggers）でこのトリガーを削除/, /SHEETQ_TRIGGER_OWNER を削除/,
    /スタンドアロン プロジェクトで installSheetqTrigger を実行/, /バインドされたプロジェクトの関数は実行しないでください/]) {
    assert.match(told, step);
  }
  assert.deepEqual(run.logs, [told], 'and it is in the execution log');

  const alices = watchedEdit(ALICE);
  const other = simpleRun(store, ALICE, alices.e);
  assert.deepEqual(alices.seen.toasts, [], 'someone else is not shown what only the owner can do');
  assert.deepEqual(other.logs, [told], 'the log says it on every edit');
});

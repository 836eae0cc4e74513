// node --test apps-script/: Code.js's own trigger management (installSheetqTrigger,
// uninstallSheetqTrigger, the simple onEdit standing down), run unmodified on the Node
// runtime (runtime/gas.js, runtime/execution.js). None of it reads the spreadsheet, so no
// emulator is needed: the project's triggers and script properties live in a temp dir. A ■
// tick, which reads and writes the spreadsheet, is run against the emulator by
// tests/it/apps_script.rs.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const { runtime, projectStore } = require('./runtime/gas.js');
const { execute } = require('./runtime/execution.js');

const SPREADSHEET = 'sheet-1';

function project() {
  return projectStore(fs.mkdtempSync(path.join(os.tmpdir(), 'sheetq-gas-')));
}

/** A run from the script editor by `who`. */
function fromEditor(store, who, fn) {
  const gas = runtime({
    apiBase: 'http://127.0.0.1:9/v4', spreadsheetId: SPREADSHEET, token: 'unused',
    effectiveUser: who, activeUser: who, authorized: true, project: store,
  });
  return execute(gas, fn, undefined, who);
}

test('installSheetqTrigger installs one edit trigger owned by whoever runs it, and never a second', () => {
  const store = project();
  const first = fromEditor(store, 'owner@example.com', 'installSheetqTrigger');
  assert.equal(first.error, null, first.error);
  assert.deepEqual(
    store.triggers().map(({ owner, handler, eventType, sourceId }) => ({ owner, handler, eventType, sourceId })),
    [{ owner: 'owner@example.com', handler: 'onSheetqEdit', eventType: 'ON_EDIT', sourceId: SPREADSHEET }],
  );
  assert.equal(store.properties().SHEETQ_TRIGGER_OWNER, 'owner@example.com',
    'the owner is recorded for the simple trigger to see');
  assert.match(first.logs.join('\n'), /トリガーを入れました/);

  const second = fromEditor(store, 'owner@example.com', 'installSheetqTrigger');
  assert.equal(second.error, null, second.error);
  assert.equal(store.triggers().length, 1, 'running it again installs nothing more');
  assert.match(second.logs.join('\n'), /既にあります/);
});

test('a second account cannot install beside the first: it is refused, naming the owner', () => {
  const store = project();
  fromEditor(store, 'owner@example.com', 'installSheetqTrigger');
  const other = fromEditor(store, 'admin@example.com', 'installSheetqTrigger');
  assert.match(String(other.error), /owner@example\.com が入れています/);
  assert.equal(store.triggers().length, 1, 'no trigger of the second account');
  assert.equal(store.properties().SHEETQ_TRIGGER_OWNER, 'owner@example.com');

  const theirs = fromEditor(store, 'admin@example.com', 'uninstallSheetqTrigger');
  assert.equal(theirs.error, null, theirs.error);
  assert.equal(store.triggers().length, 1, 'no one removes another account\'s trigger');
  assert.equal(store.properties().SHEETQ_TRIGGER_OWNER, 'owner@example.com');

  fromEditor(store, 'owner@example.com', 'uninstallSheetqTrigger');
  assert.deepEqual(store.triggers(), [], 'its owner removes it');
  assert.equal(store.properties().SHEETQ_TRIGGER_OWNER, undefined, 'and the record with it');
  const handover = fromEditor(store, 'admin@example.com', 'installSheetqTrigger');
  assert.equal(handover.error, null, handover.error);
  assert.deepEqual(store.triggers().map((t) => t.owner), ['admin@example.com']);
});

/**
 * An edit event whose range notes whether the script looked at it: A1:B2, which holds no
 * box, so the script has nothing to read past where it is.
 */
function watchedEdit() {
  const seen = { touched: false };
  const where = { getRow: 1, getColumn: 1, getNumRows: 2, getNumColumns: 2 };
  const range = new Proxy({}, {
    get(_, name) {
      seen.touched = true;
      if (name in where) return () => where[name];
      return () => assert.fail('the script read an edit that holds no box: ' + String(name));
    },
  });
  return { seen, e: { range, user: { getEmail: () => 'alice@example.com' } } };
}

function simpleRun(store, fn, e) {
  const gas = runtime({
    apiBase: 'http://127.0.0.1:9/v4', spreadsheetId: SPREADSHEET, token: 'unused',
    effectiveUser: 'alice@example.com', activeUser: 'alice@example.com', authorized: false, project: store,
  });
  return execute(gas, fn, e, 'alice@example.com');
}

test('the simple onEdit takes presses until the installable trigger is in, then leaves them to it', () => {
  const store = project();
  const before = watchedEdit();
  assert.equal(simpleRun(store, 'onEdit', before.e).error, null);
  assert.equal(before.seen.touched, true, 'with no installable trigger the simple one looks at the edit');

  fromEditor(store, 'owner@example.com', 'installSheetqTrigger');
  const after = watchedEdit();
  const run = simpleRun(store, 'onEdit', after.e);
  assert.equal(run.error, null, run.error);
  assert.equal(after.seen.touched, false, 'the simple trigger must not queue a press the installable one queues');

  fromEditor(store, 'owner@example.com', 'uninstallSheetqTrigger');
  const back = watchedEdit();
  simpleRun(store, 'onEdit', back.e);
  assert.equal(back.seen.touched, true, 'after uninstalling, the simple trigger takes presses again');
});

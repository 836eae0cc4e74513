// node --test apps-script/: the Apps Script runtime that runs Code.js in tests (runtime/gas.js),
// its date handling, who a script may see, and its triggers and script properties checked
// against what Apps Script documents.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {
  formatDate, instantOfWallClock, wallClockMs, visibleEmail, runtime, projectStore,
} = require('./runtime/gas.js');

test('formatDate writes SimpleDateFormat patterns in the given zone', () => {
  const d = new Date(Date.UTC(2026, 11, 2, 1, 4, 5, 67));
  assert.equal(formatDate(d, 'Asia/Tokyo', 'HH:mm'), '10:04');
  assert.equal(formatDate(d, 'Asia/Tokyo', "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"),
    '2026-12-02T10:04:05.067Z');
  assert.equal(formatDate(d, 'America/New_York', "yyyy-MM-dd HH 'o''clock' ''"),
    "2026-12-01 20 o'clock '");
  assert.throws(() => formatDate(d, 'Asia/Tokyo', 'EEE'), /not supported/,
    'a letter it does not know is an error, never a guess');
});

test('a wall clock read in a zone is the instant that shows it, the earlier one when it repeats', () => {
  const tokyo = Date.UTC(2026, 11, 2, 10, 4);
  assert.equal(instantOfWallClock(tokyo, 'Asia/Tokyo'), Date.UTC(2026, 11, 2, 1, 4));
  // New York falls back on 2026-11-01: 01:30 happens twice; Apps Script reads the first.
  const twice = Date.UTC(2026, 10, 1, 1, 30);
  const first = instantOfWallClock(twice, 'America/New_York');
  assert.equal(first, Date.UTC(2026, 10, 1, 5, 30), '01:30 EDT');
  assert.equal(wallClockMs(first, 'America/New_York'), twice);
});

test('a script run without a person\'s authorisation sees their e-mail only within the owner\'s Workspace domain', () => {
  assert.equal(visibleEmail('alice@example.com', 'owner@example.com'), 'alice@example.com');
  assert.equal(visibleEmail('bob@elsewhere.example', 'owner@example.com'), '');
  assert.equal(visibleEmail('carol@gmail.com', 'dave@gmail.com'), '',
    'consumer accounts share no Workspace domain');
  assert.equal(visibleEmail('carol@gmail.com', 'carol@gmail.com'), 'carol@gmail.com',
    'the script\'s owner sees themselves');
  assert.equal(visibleEmail('alice@EXAMPLE.com', 'owner@example.com'), 'alice@EXAMPLE.com',
    'domains compare without case');
});

function run(store, who, authorized) {
  return runtime({
    apiBase: 'http://127.0.0.1:9/v4', spreadsheetId: 'sheet-1', token: 'unused',
    effectiveUser: who, activeUser: authorized ? who : '', authorized, project: store,
  }).globals;
}

test('installable triggers are each account\'s own, and a simple trigger may not touch them', () => {
  const store = projectStore(fs.mkdtempSync(path.join(os.tmpdir(), 'sheetq-gas-')));
  const owner = run(store, 'owner@example.com', true);
  const made = owner.ScriptApp.newTrigger('onSheetqEdit')
    .forSpreadsheet(owner.SpreadsheetApp.getActive()).onEdit().create();
  assert.equal(made.getEventType(), owner.ScriptApp.EventType.ON_EDIT);
  assert.equal(String(made.getEventType()), 'ON_EDIT');
  assert.equal(made.getTriggerSourceId(), 'sheet-1');
  assert.deepEqual(owner.ScriptApp.getProjectTriggers().map((t) => t.getHandlerFunction()), ['onSheetqEdit']);

  const other = run(store, 'admin@example.com', true);
  assert.deepEqual(other.ScriptApp.getProjectTriggers(), [],
    'A given account cannot see triggers installed from a second account');
  other.ScriptApp.deleteTrigger(made);
  assert.equal(store.triggers().length, 1, 'nor delete them');

  const simple = run(store, 'alice@example.com', false);
  assert.throws(() => simple.ScriptApp.getProjectTriggers(),
    /You do not have permission to call ScriptApp\.getProjectTriggers/);
  assert.throws(() => simple.ScriptApp.newTrigger('x'), /permission/);
  assert.throws(() => simple.Session.getEffectiveUser(), /not modelled/,
    'what Google would answer there is not guessed');
});

test('script properties are one store for every account and every run', () => {
  const store = projectStore(fs.mkdtempSync(path.join(os.tmpdir(), 'sheetq-gas-')));
  run(store, 'owner@example.com', true).PropertiesService.getScriptProperties().setProperty('K', 'v');
  const seen = run(store, 'alice@example.com', false).PropertiesService.getScriptProperties();
  assert.equal(seen.getProperty('K'), 'v', 'a simple trigger reads what the owner set');
  assert.equal(seen.getProperty('missing'), null);
  seen.deleteProperty('K');
  assert.equal(run(store, 'owner@example.com', true).PropertiesService.getScriptProperties().getProperty('K'), null);
});

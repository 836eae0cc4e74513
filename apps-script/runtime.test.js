// node --test apps-script/: the Apps Script runtime that runs the intake's projects in tests
// (runtime/gas.js, runtime/project.js): its date handling, who a script may see, what each
// kind of project has (files, active spreadsheet, locks), and its triggers and script
// properties, checked against what Apps Script documents.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const os = require('node:os');
const path = require('node:path');
const {
  formatDate, instantOfWallClock, wallClockMs, visibleEmail, runtime,
} = require('./runtime/gas.js');
const { createProject } = require('./runtime/project.js');

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
    apiBase: 'http://127.0.0.1:9/v4', token: 'unused',
    effectiveUser: who, activeUser: authorized ? who : '', authorized, project: store,
  }).globals;
}

function tempDir() {
  return fs.mkdtempSync(path.join(os.tmpdir(), 'sheetq-gas-'));
}

function boundProject() {
  return createProject(tempDir(), { kind: 'bound', owner: 'owner@example.com', container: 'sheet-1' });
}

function standaloneProject() {
  return createProject(tempDir(), { kind: 'standalone', owner: 'owner@example.com' });
}

test('each kind of project loads its own files, after intake.js and shell.js', () => {
  const names = (store) => store.files().map((f) => path.basename(f));
  assert.deepEqual(names(boundProject()), ['intake.js', 'shell.js', 'Code.js']);
  assert.deepEqual(names(standaloneProject()), ['intake.js', 'shell.js', 'Trigger.js']);
  assert.throws(() => createProject(tempDir(), { kind: 'standalone', owner: 'o@example.com', container: 'x' }),
    /bound to no spreadsheet/);
  assert.throws(() => createProject(tempDir(), { kind: 'bound', owner: 'o@example.com' }), /needs the spreadsheet/);
});

test('a standalone project has no active spreadsheet and no document lock; its script lock is one for every account', () => {
  const store = standaloneProject();
  const owner = run(store, 'owner@example.com', true);
  assert.equal(owner.SpreadsheetApp.getActive(), null, 'getActive() is null where there is no container');
  assert.equal(owner.SpreadsheetApp.getActiveSpreadsheet(), null);
  assert.equal(owner.LockService.getDocumentLock(), null,
    'getDocumentLock() is null outside a containing document');
  const lock = owner.LockService.getScriptLock();
  assert.equal(lock.tryLock(0), true);
  const other = run(store, 'admin@example.com', true).LockService.getScriptLock();
  assert.equal(other.tryLock(50), false, 'another execution, whoever runs it, waits for the script lock');
  lock.releaseLock();
  assert.equal(other.tryLock(0), true);
  other.releaseLock();

  const bound = run(boundProject(), 'owner@example.com', true);
  assert.equal(bound.SpreadsheetApp.getActive().getId(), 'sheet-1', 'a bound project\'s is its spreadsheet');
  assert.notEqual(bound.LockService.getDocumentLock(), null);
});

test('openById needs the script\'s authorisation, which a simple trigger lacks', () => {
  const simple = run(boundProject(), 'alice@example.com', false);
  assert.throws(() => simple.SpreadsheetApp.openById('sheet-2'),
    /You do not have permission to call SpreadsheetApp\.openById/);
});

test('installable triggers are each account\'s own, and a simple trigger may not touch them', () => {
  const store = boundProject();
  const owner = run(store, 'owner@example.com', true);
  const made = owner.ScriptApp.newTrigger('onSheetqEdit')
    .forSpreadsheet(owner.SpreadsheetApp.getActive()).onEdit().create();
  assert.equal(made.getEventType(), owner.ScriptApp.EventType.ON_EDIT);
  assert.equal(String(made.getEventType()), 'ON_EDIT');
  assert.equal(made.getTriggerSourceId(), 'sheet-1');
  assert.deepEqual(owner.ScriptApp.getProjectTriggers().map((t) => t.getHandlerFunction()), ['onSheetqEdit']);
  const byId = run(standaloneProject(), 'owner@example.com', true).ScriptApp.newTrigger('onSheetqEdit')
    .forSpreadsheet('sheet-2').onEdit().create();
  assert.equal(byId.getTriggerSourceId(), 'sheet-2', 'forSpreadsheet takes the spreadsheet\'s id too');

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
  const store = boundProject();
  run(store, 'owner@example.com', true).PropertiesService.getScriptProperties().setProperty('K', 'v');
  const seen = run(store, 'alice@example.com', false).PropertiesService.getScriptProperties();
  assert.equal(seen.getProperty('K'), 'v', 'a simple trigger reads what the owner set');
  assert.equal(seen.getProperty('missing'), null);
  seen.deleteProperty('K');
  assert.equal(run(store, 'owner@example.com', true).PropertiesService.getScriptProperties().getProperty('K'), null);
});

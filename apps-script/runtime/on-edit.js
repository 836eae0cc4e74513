#!/usr/bin/env node
/**
 * Runs the Apps Script project's onEdit, unmodified, for one person's edit, against a
 * spreadsheet served over the Sheets API v4 (the sheetq emulator in tests):
 *
 *   node on-edit.js --api URL --spreadsheet ID --credentials KEY.json --user EMAIL \
 *                   --lock-dir DIR --sheet TITLE --cell A1 [--value true]
 *
 * It writes the edit itself (as the person's tick did), loads intake.js and Code.js into
 * one global scope as Apps Script does, calls onEdit(e), and prints the toasts shown as
 * JSON on stdout. An exception thrown by the script exits with status 1, its message on
 * stderr.
 */
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');
const { runtime } = require('./gas.js');

function args(argv) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) {
      throw new Error('usage: on-edit.js --api URL --spreadsheet ID --credentials FILE --user EMAIL ' +
        '--lock-dir DIR --sheet TITLE --cell A1 [--value true]; got ' + argv.slice(i).join(' '));
    }
    out[argv[i].slice(2)] = argv[i + 1];
  }
  for (const k of ['api', 'spreadsheet', 'credentials', 'user', 'lock-dir', 'sheet', 'cell']) {
    if (out[k] === undefined) throw new Error('on-edit.js needs --' + k);
  }
  return out;
}

function main() {
  const a = args(process.argv.slice(2));
  const gas = runtime({
    apiBase: a.api, spreadsheetId: a.spreadsheet, credentials: a.credentials, user: a.user,
    lockDir: a['lock-dir'],
  });
  const context = vm.createContext({ ...gas.globals, console });
  const project = path.join(__dirname, '..');
  for (const file of ['intake.js', 'Code.js']) {
    const source = fs.readFileSync(path.join(project, file), 'utf8');
    vm.runInContext(source, context, { filename: file });
  }
  const value = a.value === undefined ? true : JSON.parse(a.value);
  const e = gas.edit(a.sheet, a.cell, value);
  try {
    context.onEdit(e);
  } finally {
    // Apps Script releases a script's locks when it ends, thrown or not.
    gas.documentLock.releaseLock();
  }
  process.stdout.write(JSON.stringify({ toasts: gas.toasts }) + '\n');
}

try {
  main();
} catch (e) {
  process.stderr.write((e && e.stack) || String(e));
  process.stderr.write('\n');
  process.exit(1);
}

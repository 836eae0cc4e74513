#!/usr/bin/env node
/**
 * One person's edit of a spreadsheet served over the Sheets API v4 (the sheetq emulator in
 * tests), and every trigger Apps Script runs for it, each as its own execution of the
 * unmodified project:
 *
 *   node on-edit.js --api URL --spreadsheet ID --people-token URL --project-dir DIR \
 *                   --script-owner EMAIL --editor EMAIL --sheet TITLE --cell A1 [--value true]
 *
 * First the edit itself, written with the editor's own token (as their tick was). Then the
 * simple trigger `onEdit`, as the editor, without the script's authorisation; then each
 * installable edit trigger of the spreadsheet in the project (run.js installs them), as the
 * account that owns it ("Installable triggers always run under the account of the person
 * who created them",
 * https://developers.google.com/apps-script/guides/triggers/installable#restrictions).
 * Either sees the editor's e-mail only as Google shows it to a script that runs without
 * their authorisation (gas.js, visibleEmail; --script-owner is the project's owner).
 *
 * Prints { "runs": [ { function, as, ran, toasts, logs, error } ] } as JSON. An exception
 * thrown by the script is reported in its run; an edit the editor may not make, or a
 * failure of the runner, exits with status 1.
 */
'use strict';

const { runtime, projectStore, personToken, visibleEmail } = require('./gas.js');
const { execute, args, cli } = require('./execution.js');

const USAGE = 'on-edit.js --api URL --spreadsheet ID --people-token URL --project-dir DIR ' +
  '--script-owner EMAIL --editor EMAIL --sheet TITLE --cell A1 [--value true]';

cli((argv) => {
  const a = args(argv, ['api', 'spreadsheet', 'people-token', 'project-dir', 'script-owner',
    'editor', 'sheet', 'cell'], USAGE);
  const project = projectStore(a['project-dir']);
  const value = a.value === undefined ? true : JSON.parse(a.value);
  const seen = visibleEmail(a.editor, a['script-owner']);
  const as = (email, authorized, activeUser) => runtime({
    apiBase: a.api, spreadsheetId: a.spreadsheet, token: personToken(a['people-token'], email),
    effectiveUser: email, activeUser, authorized, project,
  });

  const simple = as(a.editor, false, seen);
  simple.rangeOf(a.sheet, a.cell).setValue(value);
  const runs = [execute(simple, 'onEdit', simple.editEvent(a.sheet, a.cell, value, { user: seen }), a.editor)];

  const installed = project.triggers()
    .filter((t) => t.eventType === 'ON_EDIT' && t.sourceId === a.spreadsheet);
  for (const t of installed) {
    const gas = as(t.owner, true, undefined);
    const e = gas.editEvent(a.sheet, a.cell, value, { user: seen, triggerUid: t.uid });
    runs.push(execute(gas, t.handler, e, t.owner));
  }
  return { runs };
});

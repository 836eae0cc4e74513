#!/usr/bin/env node
/**
 * One person's edit of a spreadsheet served over the Sheets API v4 (the sheetq emulator in
 * tests), and every trigger Apps Script runs for it, each as its own execution of its
 * unmodified project:
 *
 *   node on-edit.js --api URL --people-token URL --spreadsheet ID --editor EMAIL \
 *                   --sheet TITLE --cell A1 [--value true] --project DIR [--project DIR…]
 *
 * First the edit itself, written with the editor's own token (as their tick was). Then, for
 * each project in the order given (setup.js made them): a bound project bound to this
 * spreadsheet runs its simple trigger `onEdit`, as the editor, without the script's
 * authorisation; then every project runs each of its installable edit triggers for this
 * spreadsheet (a bound one's made with its container, a standalone one's with
 * forSpreadsheet(id)), as the account that owns it ("Installable triggers always run under
 * the account of the person who created them",
 * https://developers.google.com/apps-script/guides/triggers/installable#restrictions). A
 * trigger whose handler the project no longer has runs nothing (`ran` false). Each sees the
 * editor's e-mail only as Google shows it to a script that runs without their authorisation
 * (gas.js, visibleEmail, against the project's owner).
 *
 * Google runs these triggers with no documented order between them (at once, in fact);
 * they run here one after another in the order of the --project flags, so a test can put
 * first the one whose mistake it means to catch.
 *
 * Prints { "runs": [ { function, as, project, ran, toasts, logs, error } ] } as JSON. An
 * exception thrown by the script is reported in its run; an edit the editor may not make, or
 * a failure of the runner, exits with status 1.
 */
'use strict';

const { runtime, openSpreadsheet, rangeIn, personToken, visibleEmail } = require('./gas.js');
const { projectStore } = require('./project.js');
const { execute, args, cli } = require('./execution.js');

const USAGE = 'on-edit.js --api URL --people-token URL --spreadsheet ID --editor EMAIL ' +
  '--sheet TITLE --cell A1 [--value true] --project DIR [--project DIR…]';

cli((argv) => {
  const a = args(argv, ['api', 'people-token', 'spreadsheet', 'editor', 'sheet', 'cell', 'project'],
    USAGE, ['project']);
  const value = a.value === undefined ? true : JSON.parse(a.value);
  const token = (email) => personToken(a['people-token'], email);

  const edited = openSpreadsheet({ apiBase: a.api, spreadsheetId: a.spreadsheet, token: token(a.editor), toasts: [] });
  rangeIn(edited, a.sheet, a.cell).setValue(value);

  const runs = [];
  for (const dir of a.project) {
    const project = projectStore(dir);
    const seen = visibleEmail(a.editor, project.owner());
    const as = (email, authorized, activeUser) => runtime({
      apiBase: a.api, token: token(email), effectiveUser: email, activeUser, authorized, project,
    });
    if (project.container() === a.spreadsheet) {
      const simple = as(a.editor, false, seen);
      const e = simple.editEvent(a.spreadsheet, a.sheet, a.cell, value, { user: seen });
      runs.push(execute(simple, 'onEdit', e, a.editor));
    }
    const installed = project.triggers()
      .filter((t) => t.eventType === 'ON_EDIT' && t.sourceId === a.spreadsheet);
    for (const t of installed) {
      const gas = as(t.owner, true, undefined);
      const e = gas.editEvent(a.spreadsheet, a.sheet, a.cell, value, { user: seen, triggerUid: t.uid });
      runs.push(execute(gas, t.handler, e, t.owner));
    }
  }
  return { runs };
});

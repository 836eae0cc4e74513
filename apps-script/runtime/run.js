#!/usr/bin/env node
/**
 * A function of an Apps Script project run from its script editor by `--as`, with the
 * script's authorisation (installSheetqTrigger of the standalone project, for one), against
 * spreadsheets served over the Sheets API v4 (the sheetq emulator in tests):
 *
 *   node run.js --api URL --people-token URL --project-dir DIR --as EMAIL --function NAME
 *
 * The project (setup.js made it) says its kind: a bound one's run sees its spreadsheet as the
 * active one, a standalone one's sees none and opens a spreadsheet by id.
 *
 * Prints { function, as, project, ran, toasts, logs, error } as JSON: `logs` is what the
 * editor's execution log shows, `error` what it shows in red. A failure of the runner exits 1.
 */
'use strict';

const { runtime, personToken } = require('./gas.js');
const { projectStore } = require('./project.js');
const { execute, args, cli } = require('./execution.js');

const USAGE = 'run.js --api URL --people-token URL --project-dir DIR --as EMAIL --function NAME';

cli((argv) => {
  const a = args(argv, ['api', 'people-token', 'project-dir', 'as', 'function'], USAGE);
  const gas = runtime({
    apiBase: a.api, token: personToken(a['people-token'], a.as),
    // Whoever runs the script themselves is seen by it.
    effectiveUser: a.as, activeUser: a.as, authorized: true, project: projectStore(a['project-dir']),
  });
  return execute(gas, a.function, undefined, a.as);
});

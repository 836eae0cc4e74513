#!/usr/bin/env node
/**
 * A function of the Apps Script project run from the script editor by `--as`, with the
 * script's authorisation (installSheetqTrigger, for one), against a spreadsheet served over
 * the Sheets API v4 (the sheetq emulator in tests):
 *
 *   node run.js --api URL --spreadsheet ID --people-token URL --project-dir DIR \
 *               --as EMAIL --function NAME
 *
 * Prints { function, as, ran, toasts, logs, error } as JSON: `logs` is what the editor's
 * execution log shows, `error` what it shows in red. A failure of the runner exits 1.
 */
'use strict';

const { runtime, projectStore, personToken } = require('./gas.js');
const { execute, args, cli } = require('./execution.js');

const USAGE = 'run.js --api URL --spreadsheet ID --people-token URL --project-dir DIR ' +
  '--as EMAIL --function NAME';

cli((argv) => {
  const a = args(argv, ['api', 'spreadsheet', 'people-token', 'project-dir', 'as', 'function'], USAGE);
  const gas = runtime({
    apiBase: a.api, spreadsheetId: a.spreadsheet, token: personToken(a['people-token'], a.as),
    // Whoever runs the script themselves is seen by it.
    effectiveUser: a.as, activeUser: a.as, authorized: true, project: projectStore(a['project-dir']),
  });
  return execute(gas, a.function, undefined, a.as);
});

/**
 * One execution of the Apps Script project, for Node: intake.js and Code.js, unmodified,
 * loaded into one global scope as Apps Script loads a project's files, then one function
 * called on the services of a runtime (gas.js). What it showed (toasts), wrote to the log
 * (console) and threw is reported; the document lock is released when it ends, thrown or
 * not, as Apps Script releases a script's locks. Also the command-line parsing that the
 * entry points (on-edit.js, run.js) share.
 */
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');

/** The project's files, in the order Apps Script loads them (intake.js first). */
const FILES = ['intake.js', 'Code.js'];

/**
 * Calls `fn(arg)` of the project on `gas` (a runtime) as `as`. Returns
 * { function, as, ran, toasts, logs, error }: `ran` false when the project has no such
 * function (a simple trigger not written), `error` the thrown message or null.
 */
function execute(gas, fn, arg, as) {
  const logs = [];
  const log = (...parts) => { logs.push(parts.map(String).join(' ')); };
  const context = vm.createContext({
    ...gas.globals, console: { log, info: log, warn: log, error: log },
  });
  const project = path.join(__dirname, '..');
  for (const file of FILES) {
    vm.runInContext(fs.readFileSync(path.join(project, file), 'utf8'), context, { filename: file });
  }
  const report = { function: fn, as, ran: false, toasts: gas.toasts, logs, error: null };
  if (typeof context[fn] !== 'function') return report;
  report.ran = true;
  try {
    context[fn](arg);
  } catch (e) {
    // Thrown in the script's own realm: not an `instanceof Error` here.
    report.error = e !== null && typeof e === 'object' && 'message' in e ? String(e.message) : String(e);
    process.stderr.write(fn + ' as ' + as + ' threw: ' + ((e && e.stack) || report.error) + '\n');
  } finally {
    gas.documentLock.releaseLock();
  }
  return report;
}

/**
 * `--name value` pairs of `argv` as an object; throws `usage` when one is malformed or a
 * name of `required` is missing.
 */
function args(argv, required, usage) {
  const out = {};
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) {
      throw new Error('usage: ' + usage + '; got ' + argv.slice(i).join(' '));
    }
    out[argv[i].slice(2)] = argv[i + 1];
  }
  const missing = required.filter((k) => out[k] === undefined);
  if (missing.length > 0) {
    throw new Error('missing ' + missing.map((k) => '--' + k).join(', ') + '; usage: ' + usage);
  }
  return out;
}

/** Runs `main`, printing what it returns as JSON; a failure of the runner itself exits 1. */
function cli(main) {
  try {
    process.stdout.write(JSON.stringify(main(process.argv.slice(2))) + '\n');
  } catch (e) {
    process.stderr.write(((e && e.stack) || String(e)) + '\n');
    process.exit(1);
  }
}

module.exports = { execute, args, cli };

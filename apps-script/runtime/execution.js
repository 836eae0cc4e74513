/**
 * One execution of an Apps Script project, for Node: the project's files (project.js: its
 * kind's, from its code directory), unmodified, loaded into one global scope as Apps Script
 * loads a project's files, then one function called on the services of a runtime (gas.js).
 * What it showed (toasts), wrote to the log (console) and threw is reported; every lock is
 * released when it ends, thrown or not, as Apps Script releases a script's locks. Also the
 * command-line parsing that the entry points (on-edit.js, run.js, setup.js) share.
 */
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const vm = require('node:vm');

/**
 * Calls `fn(arg)` of `gas`'s project on `gas` (a runtime) as `as`. Returns
 * { function, as, project, ran, toasts, logs, error }: `project` the project's kind, `ran`
 * false when the project has no such function (a simple trigger not written, the handler of
 * a trigger whose function is gone: Apps Script then runs nothing), `error` the thrown
 * message or null.
 */
function execute(gas, fn, arg, as) {
  const logs = [];
  const log = (...parts) => { logs.push(parts.map(String).join(' ')); };
  const context = vm.createContext({
    ...gas.globals, console: { log, info: log, warn: log, error: log },
  });
  for (const file of gas.project.files()) {
    vm.runInContext(fs.readFileSync(file, 'utf8'), context, { filename: path.basename(file) });
  }
  const report = {
    function: fn, as, project: gas.project.kind(), ran: false, toasts: gas.toasts, logs, error: null,
  };
  if (typeof context[fn] !== 'function') return report;
  report.ran = true;
  try {
    context[fn](arg);
  } catch (e) {
    // Thrown in the script's own realm: not an `instanceof Error` here.
    report.error = e !== null && typeof e === 'object' && 'message' in e ? String(e.message) : String(e);
    process.stderr.write(fn + ' as ' + as + ' threw: ' + ((e && e.stack) || report.error) + '\n');
  } finally {
    gas.releaseLocks();
  }
  return report;
}

/**
 * `--name value` pairs of `argv` as an object; a name of `repeated` may come more than once
 * and is an array (empty when absent). Throws `usage` when a pair is malformed or a name of
 * `required` is missing.
 */
function args(argv, required, usage, repeated = []) {
  const out = {};
  for (const name of repeated) out[name] = [];
  for (let i = 0; i < argv.length; i += 2) {
    if (!argv[i].startsWith('--') || argv[i + 1] === undefined) {
      throw new Error('usage: ' + usage + '; got ' + argv.slice(i).join(' '));
    }
    const name = argv[i].slice(2);
    if (repeated.includes(name)) out[name].push(argv[i + 1]);
    else out[name] = argv[i + 1];
  }
  const missing = required.filter((k) => out[k] === undefined || (Array.isArray(out[k]) && out[k].length === 0));
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

/**
 * An Apps Script project, for Node: its kind, whose files it loads, who owns it, the code
 * it holds, and what outlives one execution of it (the locks, the script properties and the
 * installable triggers), all kept in the project's directory.
 *
 * Two kinds, as Google makes them
 * (https://developers.google.com/apps-script/guides/projects):
 *   bound       created from a spreadsheet (Extensions → Apps Script): it has a container,
 *               the spreadsheet, which SpreadsheetApp.getActive() returns and whose document
 *               lock LockService.getDocumentLock() gives; Google shares it with every editor
 *               of the spreadsheet, so any of them may change its code.
 *   standalone  created on its own (script.google.com, `clasp create --type standalone`): no
 *               container, so getActive() is null and getDocumentLock() is null; it reaches
 *               a spreadsheet with openById or through a trigger's event; only its owner
 *               (and whom they share it with) sees or edits it.
 * The files each kind loads, in the order Apps Script loads them (intake.js first), are the
 * kind's `files`: a project is apps-script/'s files for its kind, or another directory's
 * (the code an editor wrote into a bound project, in a test).
 */
'use strict';

const fs = require('node:fs');
const path = require('node:path');

/** The repository's apps-script/ directory: the code a project holds unless told otherwise. */
const SHIPPED = path.join(__dirname, '..');

const KINDS = Object.freeze({
  bound: Object.freeze({ files: ['intake.js', 'shell.js', 'Code.js'], container: true }),
  standalone: Object.freeze({ files: ['intake.js', 'shell.js', 'Trigger.js'], container: false }),
});

/**
 * The project kept in `dir`. Its settings (project.json: kind, owner, container, code) are
 * written by createProject and setCode; its lasting state (the lock directories, the script
 * properties and the installable triggers, JSON files each replaced whole by a rename) by the
 * executions.
 */
function projectStore(dir) {
  const file = (name) => path.join(dir, name);
  function read(name, empty) {
    try {
      return JSON.parse(fs.readFileSync(file(name), 'utf8'));
    } catch (e) {
      if (e.code === 'ENOENT') return empty;
      throw e;
    }
  }
  function write(name, value) {
    const tmp = file(name + '.' + process.pid + '.tmp');
    fs.writeFileSync(tmp, JSON.stringify(value, null, 2));
    fs.renameSync(tmp, file(name));
  }
  function settings() {
    const s = read('project.json', null);
    if (s === null) throw new Error('no Apps Script project in ' + dir + ': create it first (runtime/setup.js --create)');
    return s;
  }
  return {
    dir,
    /** 'bound' or 'standalone'. */
    kind: () => settings().kind,
    /** The files the project loads, in order, with the directory they are read from. */
    files: () => KINDS[settings().kind].files.map((f) => path.join(settings().code, f)),
    /** The account that created the project (a bound one's is the spreadsheet's owner). */
    owner: () => settings().owner,
    /** The spreadsheet a bound project is bound to; null for a standalone one. */
    container: () => (KINDS[settings().kind].container ? settings().container : null),
    setCode: (code) => write('project.json', { ...settings(), code: path.resolve(code) }),
    documentLockPath: file('document.lock'),
    scriptLockPath: file('script.lock'),
    properties: () => read('script-properties.json', {}),
    setProperties: (p) => write('script-properties.json', p),
    /** Every installable trigger: { uid, owner, handler, eventType, sourceId }. */
    triggers: () => read('triggers.json', []),
    setTriggers: (t) => write('triggers.json', t),
    writeSettings: (s) => write('project.json', s),
  };
}

/**
 * Creates a project of `kind` owned by `owner` in `dir` (a bound one bound to spreadsheet
 * `container`), holding the code of directory `code` (apps-script/ unless given).
 */
function createProject(dir, { kind, owner, container, code }) {
  if (!KINDS[kind]) throw new Error('no project kind ' + kind + ' (kinds: ' + Object.keys(KINDS).join(', ') + ')');
  if (!owner) throw new Error('a project has an owner: the account that creates it');
  if (KINDS[kind].container && !container) throw new Error('a bound project needs the spreadsheet it is bound to');
  if (!KINDS[kind].container && container) throw new Error('a standalone project is bound to no spreadsheet');
  fs.mkdirSync(dir, { recursive: true });
  const store = projectStore(dir);
  store.writeSettings({
    kind, owner: String(owner), container: container || null, code: path.resolve(code || SHIPPED),
  });
  return store;
}

module.exports = { KINDS, SHIPPED, projectStore, createProject };

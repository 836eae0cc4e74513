#!/usr/bin/env node
/**
 * What a person does to an Apps Script project outside its code's functions (project.js):
 *
 *   node setup.js --project-dir DIR --create bound --owner EMAIL --container ID [--code DIR]
 *   node setup.js --project-dir DIR --create standalone --owner EMAIL [--code DIR]
 *       creates the project: a bound one from its spreadsheet (Extensions → Apps Script),
 *       a standalone one at script.google.com or with `clasp create --type standalone`;
 *       it holds apps-script/'s files for its kind, or those of --code.
 *   node setup.js --project-dir DIR --code DIR
 *       puts other code into it (pasting, `clasp push`; an editor rewriting a bound one).
 *   node setup.js --project-dir DIR --property NAME --value VALUE
 *       sets a script property, as Project Settings → Script properties does.
 *
 * Prints { kind, owner, container, properties } as JSON; a failure exits 1.
 */
'use strict';

const { projectStore, createProject } = require('./project.js');
const { args, cli } = require('./execution.js');

const USAGE = 'setup.js --project-dir DIR [--create KIND --owner EMAIL [--container ID]] ' +
  '[--code DIR] [--property NAME --value VALUE]';

cli((argv) => {
  const a = args(argv, ['project-dir'], USAGE);
  const dir = a['project-dir'];
  const project = a.create !== undefined
    ? createProject(dir, { kind: a.create, owner: a.owner, container: a.container, code: a.code })
    : projectStore(dir);
  if (a.create === undefined && a.code !== undefined) project.setCode(a.code);
  if (a.property !== undefined) {
    if (a.value === undefined) throw new Error('--property needs --value; usage: ' + USAGE);
    project.setProperties({ ...project.properties(), [a.property]: a.value });
  }
  return {
    kind: project.kind(), owner: project.owner(), container: project.container(), properties: project.properties(),
  };
});

/**
 * The Apps Script services that Code.js calls, for Node, over the Sheets API v4 (the sheetq
 * emulator in tests): SpreadsheetApp's Spreadsheet, Sheet and Range, LockService's document
 * lock, PropertiesService's script properties, ScriptApp's installable triggers, Session and
 * Utilities. Each Sheets call is one synchronous HTTP request, as each service call of Apps
 * Script is, so Code.js runs unmodified and in its own order. One `runtime` is one execution
 * of the script, as one account; what outlives an execution (the document lock, script
 * properties, installable triggers) lives in the project's directory (`projectStore`).
 *
 * Only what Code.js uses is here, and each piece behaves as Apps Script documents it:
 *   - Range.getValues(): '' for an empty cell, numbers, booleans and strings as they are, and
 *     a Date for a cell whose number format is a date or time (the serial read in the
 *     spreadsheet's time zone).
 *     https://developers.google.com/apps-script/reference/spreadsheet/range#getValues()
 *   - Range.setValue()/Sheet.appendRow(): values are taken as if typed (USER_ENTERED);
 *     appendRow is atomic, writes after the last row with content and adds a row to the
 *     grid when it is full (one AppendCellsRequest).
 *     https://developers.google.com/apps-script/reference/spreadsheet/sheet#appendRow(Object)
 *     A write Google refuses throws an Exception carrying Google's message (for a protected
 *     range: "You are trying to edit a protected cell or object…").
 *   - Sheet.getDataRange(): A1 to the last row and column with content.
 *   - LockService.getDocumentLock(): one lock per document across every running script;
 *     waitLock(ms) throws when it is not had within ms.
 *     https://developers.google.com/apps-script/reference/lock/lock#waitLock(Integer)
 *   - PropertiesService.getScriptProperties(): one store shared by every user of the
 *     project; a simple trigger may read it (AuthMode.LIMITED).
 *     https://developers.google.com/apps-script/reference/properties/properties-service
 *   - ScriptApp: newTrigger(fn).forSpreadsheet(ss).onEdit().create(), getProjectTriggers()
 *     (the triggers of the current user only: "A given account cannot see triggers
 *     installed from a second account") and deleteTrigger(). Needs authorisation, so a
 *     simple trigger's call throws.
 *     https://developers.google.com/apps-script/reference/script/script-app
 *     https://developers.google.com/apps-script/guides/triggers/installable#restrictions
 *   - Session: getActiveUser() in a simple trigger or a run from the editor,
 *     getEffectiveUser() where the script runs with authorisation (the trigger's owner for
 *     an installable trigger). Where this runtime does not know Google's answer (the active
 *     user of an installable trigger, the effective user of a simple one) the call throws.
 *     https://developers.google.com/apps-script/reference/base/session
 *   - Utilities.formatDate(): SimpleDateFormat patterns (the letters Code.js uses; any other
 *     letter is an error here rather than a guess).
 */
'use strict';

const { execFileSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');
const path = require('node:path');

const SERIAL_EPOCH_MS = Date.UTC(1899, 11, 30);
const MS_PER_DAY = 86400000;

/** One HTTP request, synchronously: a child Node process sends it with fetch. */
function httpSync(method, url, headers, body) {
  const script = `
    let input = '';
    process.stdin.on('data', (d) => { input += d; });
    process.stdin.on('end', async () => {
      const r = JSON.parse(input);
      try {
        const res = await fetch(r.url, { method: r.method, headers: r.headers, body: r.body });
        process.stdout.write(JSON.stringify({ status: res.status, text: await res.text() }));
      } catch (e) {
        process.stdout.write(JSON.stringify({ status: 0, text: String(e) }));
      }
    });`;
  const out = execFileSync(process.execPath, ['-e', script], {
    input: JSON.stringify({ method, url, headers, body }),
    maxBuffer: 64 * 1024 * 1024,
  });
  return JSON.parse(out.toString('utf8'));
}

/** Blocks the thread for `ms` (Apps Script's Utilities.sleep). */
function sleep(ms) {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
}

/**
 * An access token for the person `email`, from the emulator's people endpoint
 * (`POST /_emulator/people/token`): people sign in with Google, not with a key, so the
 * emulator hands their tokens out directly.
 */
function personToken(tokenUrl, email) {
  const r = httpSync('POST', tokenUrl, { 'content-type': 'application/json' },
    JSON.stringify({ email }));
  if (r.status !== 200) {
    throw new Error('no token for ' + email + ': ' + tokenUrl + ' answered ' + r.status + ': ' + r.text);
  }
  return JSON.parse(r.text).access_token;
}

/** Consumer Google accounts: no Workspace domain, so no one shares one with them. */
const CONSUMER_DOMAINS = ['gmail.com', 'googlemail.com'];

function domainOf(email) {
  const at = String(email).lastIndexOf('@');
  return at < 0 ? '' : String(email).slice(at + 1).toLowerCase();
}

/**
 * The e-mail a script run without `user`'s own authorisation may see of them (an edit
 * event's `user`, Session.getActiveUser() in a simple trigger): theirs when they own the
 * script or share its owner's Google Workspace domain, else ''. "The user's email address
 * is not available in any context that allows a script to run without that user's
 * authorization … However, these restrictions generally do not apply if the developer runs
 * the script themselves or belongs to the same Google Workspace domain as the user."
 * https://developers.google.com/apps-script/reference/base/user#getEmail()
 */
function visibleEmail(user, scriptOwner) {
  if (user === scriptOwner) return user;
  const domain = domainOf(user);
  if (domain === '' || CONSUMER_DOMAINS.includes(domain)) return '';
  return domain === domainOf(scriptOwner) ? user : '';
}

/** A User, as Session and edit events give one. */
function userObject(email) {
  return { getEmail: () => email, toString: () => email };
}

/** An Apps Script enum value: compares by identity, prints as its name. */
function enumValue(name) {
  return Object.freeze({ name: () => name, toString: () => name, toJSON: () => name });
}

const EventType = Object.freeze({ ON_EDIT: enumValue('ON_EDIT') });
const TriggerSource = Object.freeze({ SPREADSHEETS: enumValue('SPREADSHEETS') });

/**
 * What outlives one execution of the project, kept in `dir`: the document lock (a
 * directory), the script properties and the installable triggers (JSON files, each
 * replaced whole by a rename).
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
  return {
    lockPath: file('document.lock'),
    properties: () => read('script-properties.json', {}),
    setProperties: (p) => write('script-properties.json', p),
    /** Every installable trigger: { uid, owner, handler, eventType, sourceId }. */
    triggers: () => read('triggers.json', []),
    setTriggers: (t) => write('triggers.json', t),
  };
}

/** Column letters of 1-based column `n`. */
function letters(n) {
  let s = '';
  for (let c = n; c > 0; c = Math.floor((c - 1) / 26)) s = String.fromCharCode(65 + ((c - 1) % 26)) + s;
  return s;
}

/** Row and column (1-based) of a single-cell A1 reference such as `G1`. */
function parseCell(a1) {
  const m = /^([A-Z]+)([0-9]+)$/.exec(a1);
  if (m === null) throw new Error('Range not found: ' + a1);
  let col = 0;
  for (const ch of m[1]) col = col * 26 + (ch.charCodeAt(0) - 64);
  return { row: Number(m[2]), col };
}

function quoted(title) {
  return "'" + title.replace(/'/g, "''") + "'";
}

/** Milliseconds of the wall clock of `timeZone` at `instantMs`, counted as if it were UTC. */
function wallClockMs(instantMs, timeZone) {
  const parts = new Intl.DateTimeFormat('en-US', {
    timeZone, hourCycle: 'h23', year: 'numeric', month: '2-digit', day: '2-digit',
    hour: '2-digit', minute: '2-digit', second: '2-digit',
  }).formatToParts(new Date(instantMs));
  const get = (type) => Number(parts.find((p) => p.type === type).value);
  const ms = ((instantMs % 1000) + 1000) % 1000;
  return Date.UTC(get('year'), get('month') - 1, get('day'), get('hour'), get('minute'),
    get('second'), ms);
}

/** The instant whose wall clock in `timeZone` is `wallMs` (the earlier one when it repeats). */
function instantOfWallClock(wallMs, timeZone) {
  let guess = wallMs;
  for (let i = 0; i < 3; i++) guess = wallMs - (wallClockMs(guess, timeZone) - guess);
  return guess;
}

/** SimpleDateFormat, for the letters y M d H m s S and quoted text. */
function formatDate(date, timeZone, pattern) {
  const wall = new Date(wallClockMs(date.getTime(), timeZone));
  const field = {
    y: (n) => String(wall.getUTCFullYear()).padStart(n, '0').slice(n === 2 ? -2 : 0),
    M: (n) => String(wall.getUTCMonth() + 1).padStart(n, '0'),
    d: (n) => String(wall.getUTCDate()).padStart(n, '0'),
    H: (n) => String(wall.getUTCHours()).padStart(n, '0'),
    m: (n) => String(wall.getUTCMinutes()).padStart(n, '0'),
    s: (n) => String(wall.getUTCSeconds()).padStart(n, '0'),
    S: (n) => String(wall.getUTCMilliseconds()).padStart(3, '0').slice(0, Math.max(n, 3)),
  };
  let out = '';
  for (let i = 0; i < pattern.length;) {
    const ch = pattern[i];
    if (ch === "'" && pattern[i + 1] === "'") {
      out += "'";
      i += 2;
    } else if (ch === "'") {
      // Quoted text, in which '' stands for one quote.
      let j = i + 1;
      for (;;) {
        if (j >= pattern.length) throw new Error('Unterminated quote in date pattern ' + pattern);
        if (pattern[j] === "'" && pattern[j + 1] === "'") {
          out += "'";
          j += 2;
        } else if (pattern[j] === "'") {
          break;
        } else {
          out += pattern[j++];
        }
      }
      i = j + 1;
    } else if (/[A-Za-z]/.test(ch)) {
      let n = 1;
      while (pattern[i + n] === ch) n++;
      if (!field[ch]) throw new Error('date pattern letter ' + ch + ' is not supported here');
      out += field[ch](n);
      i += n;
    } else {
      out += ch;
      i++;
    }
  }
  return out;
}

/**
 * The services of one execution, for the spreadsheet `spreadsheetId` at `apiBase` (…/v4/):
 *   token          the access token of the account the script runs as;
 *   effectiveUser  that account's e-mail (Session.getEffectiveUser());
 *   activeUser     what Session.getActiveUser() gives ('' when hidden), or undefined where
 *                  this runtime does not know;
 *   authorized     whether the run has the script's authorisation (an installable trigger,
 *                  a run from the editor) or not (a simple trigger);
 *   project        the project's lasting state (projectStore).
 */
function runtime({ apiBase, spreadsheetId, token, effectiveUser, activeUser, authorized, project }) {
  const toasts = [];

  function api(method, pathAndQuery, body) {
    const url = apiBase.replace(/\/$/, '') + '/spreadsheets/' + encodeURIComponent(spreadsheetId) +
      pathAndQuery;
    const headers = { authorization: 'Bearer ' + token };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const r = httpSync(method, url, headers, body === undefined ? undefined : JSON.stringify(body));
    if (r.status !== 200) {
      // Apps Script throws with Google's own message, as the person sees it in the editor.
      let said = '';
      try {
        said = JSON.parse(r.text).error.message || '';
      } catch (e) {
        said = '';
      }
      throw new Error('Exception: ' + (said || 'Service Spreadsheets failed') + ' (' + method + ' ' +
        pathAndQuery + ' answered ' + r.status + '): ' + r.text);
    }
    return JSON.parse(r.text);
  }

  // The spreadsheet's zone, read once: it does not change while one script runs.
  let zone;
  function timeZone() {
    if (zone === undefined) zone = api('GET', '?fields=properties.timeZone').properties.timeZone;
    return zone;
  }

  function sheetsMeta() {
    const fields = encodeURIComponent('sheets.properties(sheetId,title,index,gridProperties)');
    return (api('GET', '?fields=' + fields).sheets || []).map((s) => s.properties);
  }

  class Range {
    constructor(sheet, row, col, rows, cols) {
      if (row < 1 || col < 1 || rows < 1 || cols < 1) {
        throw new Error('Exception: The coordinates of the range are outside the dimensions of the sheet.');
      }
      Object.assign(this, { sheet, row, col, rows, cols });
    }
    getSheet() { return this.sheet; }
    getRow() { return this.row; }
    getColumn() { return this.col; }
    getNumRows() { return this.rows; }
    getNumColumns() { return this.cols; }
    getA1Notation() {
      const first = letters(this.col) + this.row;
      const last = letters(this.col + this.cols - 1) + (this.row + this.rows - 1);
      return first === last ? first : first + ':' + last;
    }
    a1() { return quoted(this.sheet.getName()) + '!' + this.getA1Notation(); }
    getValue() { return this.getValues()[0][0]; }
    getValues() {
      const fields = encodeURIComponent(
        'sheets.data.rowData.values(effectiveValue,userEnteredFormat.numberFormat)');
      const got = api('GET', '?includeGridData=true&ranges=' + encodeURIComponent(this.a1()) +
        '&fields=' + fields);
      const rowData = (((got.sheets || [])[0] || {}).data || [{}])[0].rowData || [];
      const out = [];
      for (let r = 0; r < this.rows; r++) {
        const cells = (rowData[r] || {}).values || [];
        const row = [];
        for (let c = 0; c < this.cols; c++) row.push(valueOf(cells[c] || {}));
        out.push(row);
      }
      return out;
    }
    setValue(value) { return this.setValues([[value]]); }
    setValues(values) {
      api('PUT', '/values/' + encodeURIComponent(this.a1()) + '?valueInputOption=USER_ENTERED',
        { range: this.a1(), majorDimension: 'ROWS', values: values.map((r) => r.map(typed)) });
      return this;
    }
  }

  /** A cell as getValues gives it (a date cell read in the spreadsheet's zone). */
  function valueOf(cell) {
    const v = cell.effectiveValue;
    if (v === undefined) return '';
    if (v.numberValue !== undefined) {
      const type = ((cell.userEnteredFormat || {}).numberFormat || {}).type;
      if (type === 'DATE' || type === 'TIME' || type === 'DATE_TIME') {
        return new Date(
          instantOfWallClock(v.numberValue * MS_PER_DAY + SERIAL_EPOCH_MS, timeZone()));
      }
      return v.numberValue;
    }
    if (v.boolValue !== undefined) return v.boolValue;
    if (v.stringValue !== undefined) return v.stringValue;
    if (v.errorValue !== undefined) return v.errorValue.message || '#ERROR!';
    return '';
  }

  /** A script's value as the API takes it when typed in (a Date as its serial). */
  function typed(v) {
    if (v instanceof Date) {
      return (wallClockMs(v.getTime(), timeZone()) - SERIAL_EPOCH_MS) / MS_PER_DAY;
    }
    if (v === null || v === undefined) return '';
    return v;
  }

  /**
   * A script's value as a typed-in cell (`ExtendedValue`): numbers, booleans, formulas, and
   * text that reads as a plain number or TRUE/FALSE taken as such, as typing it would. Text
   * that reads as a date stays text here; Code.js writes none.
   */
  function entered(v) {
    const t = typed(v);
    if (typeof t === 'number') return { numberValue: t };
    if (typeof t === 'boolean') return { boolValue: t };
    const s = String(t);
    if (s.startsWith('=')) return { formulaValue: s };
    if (/^[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?$/.test(s.trim())) return { numberValue: Number(s) };
    if (/^(true|false)$/i.test(s.trim())) return { boolValue: s.trim().toLowerCase() === 'true' };
    return { stringValue: s };
  }

  class Sheet {
    constructor(props) { this.props = props; }
    getName() { return this.props.title; }
    getSheetId() { return this.props.sheetId; }
    getRange(a, col, rows, cols) {
      if (typeof a === 'string') {
        const [first, last] = a.split(':').map(parseCell);
        const end = last || first;
        return new Range(this, first.row, first.col, end.row - first.row + 1, end.col - first.col + 1);
      }
      return new Range(this, a, col, rows === undefined ? 1 : rows, cols === undefined ? 1 : cols);
    }
    /** The values from A1 to the last row and column with content (Google trims the rest). */
    contentValues() {
      const got = api('GET', '/values/' + encodeURIComponent(quoted(this.getName())) +
        '?valueRenderOption=UNFORMATTED_VALUE');
      return got.values || [];
    }
    getLastRow() { return this.contentValues().length; }
    getLastColumn() {
      return this.contentValues().reduce((w, r) => Math.max(w, r.length), 0);
    }
    getDataRange() {
      const values = this.contentValues();
      const width = values.reduce((w, r) => Math.max(w, r.length), 0);
      return new Range(this, 1, 1, Math.max(values.length, 1), Math.max(width, 1));
    }
    /**
     * Atomic, as Apps Script documents (no other write can come between finding the last
     * row and writing after it): one AppendCellsRequest, which writes after the last row
     * with data and adds rows to the grid as needed.
     */
    appendRow(values) {
      api('POST', ':batchUpdate', { requests: [{ appendCells: {
        sheetId: this.getSheetId(),
        rows: [{ values: values.map((v) => ({ userEnteredValue: entered(v) })) }],
        fields: 'userEnteredValue',
      } }] });
      return this;
    }
  }

  const spreadsheet = {
    getId() { return spreadsheetId; },
    getSpreadsheetTimeZone: timeZone,
    getSheets() { return sheetsMeta().sort((a, b) => a.index - b.index).map((p) => new Sheet(p)); },
    getSheetByName(name) {
      const p = sheetsMeta().find((s) => s.title === name);
      return p === undefined ? null : new Sheet(p);
    },
    toast(message, title) { toasts.push({ message: String(message), title: String(title) }); },
  };

  let held = false;
  const documentLock = {
    tryLock(ms) {
      const until = Date.now() + ms;
      for (;;) {
        try {
          fs.mkdirSync(project.lockPath);
          held = true;
          return true;
        } catch (e) {
          if (e.code !== 'EEXIST') throw e;
        }
        if (Date.now() >= until) return false;
        sleep(20);
      }
    },
    waitLock(ms) {
      if (!this.tryLock(ms)) {
        throw new Error('Exception: Lock timeout: another process was holding the lock for too long.');
      }
    },
    hasLock() { return held; },
    releaseLock() {
      if (held) fs.rmdirSync(project.lockPath);
      held = false;
    },
  };

  const scriptProperties = {
    getProperty(key) {
      const v = project.properties()[key];
      return v === undefined ? null : v;
    },
    getProperties() { return { ...project.properties() }; },
    setProperty(key, value) {
      project.setProperties({ ...project.properties(), [key]: String(value) });
      return this;
    },
    deleteProperty(key) {
      const p = project.properties();
      delete p[key];
      project.setProperties(p);
      return this;
    },
  };

  /** A service call that needs the script's authorisation, which a simple trigger lacks. */
  function authorised(what, scope) {
    if (!authorized) {
      throw new Error('Exception: You do not have permission to call ' + what +
        '. Required permissions: ' + scope);
    }
  }
  const SCRIPTAPP_SCOPE = 'https://www.googleapis.com/auth/script.scriptapp';

  function triggerObject(t) {
    return {
      getUniqueId: () => t.uid,
      getHandlerFunction: () => t.handler,
      getEventType: () => EventType[t.eventType],
      getTriggerSource: () => TriggerSource.SPREADSHEETS,
      getTriggerSourceId: () => t.sourceId,
    };
  }

  const scriptApp = {
    EventType,
    TriggerSource,
    newTrigger(handler) {
      authorised('ScriptApp.newTrigger', SCRIPTAPP_SCOPE);
      return {
        forSpreadsheet(ss) {
          return {
            onEdit() {
              return {
                create() {
                  const t = {
                    uid: String(crypto.randomInt(2 ** 47)), owner: effectiveUser, handler: String(handler),
                    eventType: 'ON_EDIT', sourceId: ss.getId(),
                  };
                  project.setTriggers(project.triggers().concat([t]));
                  return triggerObject(t);
                },
              };
            },
          };
        },
      };
    },
    getProjectTriggers() {
      authorised('ScriptApp.getProjectTriggers', SCRIPTAPP_SCOPE);
      return project.triggers().filter((t) => t.owner === effectiveUser).map(triggerObject);
    },
    deleteTrigger(trigger) {
      authorised('ScriptApp.deleteTrigger', SCRIPTAPP_SCOPE);
      const uid = trigger.getUniqueId();
      project.setTriggers(project.triggers().filter((t) => !(t.uid === uid && t.owner === effectiveUser)));
    },
  };

  const session = {
    getActiveUser() {
      if (activeUser === undefined) {
        throw new Error('Session.getActiveUser() in this kind of run is not modelled here; ' +
          'an installable trigger learns who edited from the event\'s user');
      }
      return userObject(activeUser);
    },
    getEffectiveUser() {
      if (!authorized) {
        throw new Error('Session.getEffectiveUser() in a simple trigger is not modelled here');
      }
      return userObject(effectiveUser);
    },
  };

  const globals = {
    SpreadsheetApp: {
      getActive: () => spreadsheet, getActiveSpreadsheet: () => spreadsheet, openById: () => spreadsheet,
    },
    LockService: { getDocumentLock: () => documentLock },
    PropertiesService: { getScriptProperties: () => scriptProperties },
    ScriptApp: scriptApp,
    Session: session,
    Utilities: { getUuid: () => crypto.randomUUID(), formatDate, sleep },
  };

  /** The range `a1` of sheet `title` (which must exist). */
  function rangeOf(title, a1) {
    const sheet = spreadsheet.getSheetByName(title);
    if (sheet === null) throw new Error('no sheet ' + title);
    return sheet.getRange(a1);
  }

  /**
   * The event of an edit that set `a1` of sheet `title` to `value`, seen by this execution:
   * `user` the e-mail it may see of the person who edited ('' when hidden), `triggerUid`
   * the installable trigger that fired (none for a simple trigger).
   * https://developers.google.com/apps-script/guides/triggers/events#edit
   */
  function editEvent(title, a1, value, { user, triggerUid }) {
    const e = {
      authMode: authorized ? 'FULL' : 'LIMITED',
      range: rangeOf(title, a1),
      source: spreadsheet,
      value: String(value).toUpperCase(),
      user: userObject(user),
    };
    if (triggerUid !== undefined) e.triggerUid = triggerUid;
    return e;
  }

  return { globals, toasts, rangeOf, editEvent, documentLock };
}

module.exports = {
  runtime, projectStore, personToken, visibleEmail, formatDate, instantOfWallClock, wallClockMs,
};

/**
 * The Apps Script services that the intake's projects call (runtime/project.js: the bound
 * one loads intake.js, shell.js and Code.js, the standalone one intake.js, shell.js and
 * Trigger.js), for Node, over the Sheets API v4 (the sheetq emulator in tests):
 * SpreadsheetApp's Spreadsheet, Sheet, Range and Protection, LockService's document and
 * script locks, PropertiesService's script properties, ScriptApp's installable triggers,
 * Session and Utilities. Each Sheets call is one synchronous HTTP request, as each service
 * call of Apps Script is, so the project's files run unmodified and in their own order. One
 * `runtime` is one execution of one project, as one account; what outlives an execution (the
 * locks, script properties, installable triggers) lives in the project's directory
 * (project.js, projectStore).
 *
 * Only what the project's files use is here, and each piece behaves as Apps Script documents
 * it:
 *   - SpreadsheetApp.getActive()/getActiveSpreadsheet(): the spreadsheet a bound project is
 *     bound to; null in a standalone project, which has none ("Returns the currently active
 *     spreadsheet, or null if there is none").
 *     https://developers.google.com/apps-script/reference/spreadsheet/spreadsheet-app#getActiveSpreadsheet()
 *   - SpreadsheetApp.openById(id): that spreadsheet, if the running account can open it (one
 *     read, which throws with Google's message when it cannot). It needs authorisation, so a
 *     simple trigger's call throws ("They can modify the file they are bound to, but cannot
 *     access other files because that would require authorization").
 *     https://developers.google.com/apps-script/reference/spreadsheet/spreadsheet-app#openById(String)
 *     https://developers.google.com/apps-script/guides/triggers#restrictions
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
 *   - Sheet.getProtections(type): the sheet's protections of that type, whoever may edit them
 *     (SHEET: a protected range with no bounds, which the Sheets API calls "a protected
 *     sheet"; RANGE: any other), as Protection objects: canEdit() ("Determines whether the
 *     user has permission to edit the protected range or sheet. The owner of the spreadsheet
 *     is always able to edit protected ranges and sheets": the API's requestingUserCanEdit),
 *     isWarningOnly(), getDescription(), getProtectionType() and remove() (one
 *     deleteProtectedRange, which Google refuses to whoever may not edit the protection).
 *     https://developers.google.com/apps-script/reference/spreadsheet/sheet#getProtections(ProtectionType)
 *     https://developers.google.com/apps-script/reference/spreadsheet/protection
 *     https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets/sheets#ProtectedRange
 *   - LockService.getDocumentLock(): one lock per document across every execution of the
 *     bound project; null in a standalone project ("If this method is called outside of the
 *     context of a containing document (such as from a standalone script or web app), null
 *     is returned"). LockService.getScriptLock(): one lock per project, whoever runs it
 *     ("Sections of code guarded by a script lock cannot be executed simultaneously
 *     regardless of the identity of the user"). waitLock(ms) throws when the lock is not had
 *     within ms; every lock is released when the execution ends.
 *     https://developers.google.com/apps-script/reference/lock/lock-service
 *     https://developers.google.com/apps-script/reference/lock/lock#waitLock(Integer)
 *   - PropertiesService.getScriptProperties(): one store shared by every user of the
 *     project; a simple trigger may read it (AuthMode.LIMITED).
 *     https://developers.google.com/apps-script/reference/properties/properties-service
 *   - ScriptApp: newTrigger(fn).forSpreadsheet(spreadsheet or id).onEdit().create(),
 *     getProjectTriggers() (the triggers of the current user only: "A given account cannot
 *     see triggers installed from a second account") and deleteTrigger(). Needs
 *     authorisation, so a simple trigger's call throws.
 *     https://developers.google.com/apps-script/reference/script/script-app
 *     https://developers.google.com/apps-script/reference/script/spreadsheet-trigger-builder
 *     https://developers.google.com/apps-script/guides/triggers/installable#restrictions
 *   - Session: getActiveUser() in a simple trigger or a run from the editor,
 *     getEffectiveUser() where the script runs with authorisation (the trigger's owner for
 *     an installable trigger). Where this runtime does not know Google's answer (the active
 *     user of an installable trigger, the effective user of a simple one) the call throws.
 *     https://developers.google.com/apps-script/reference/base/session
 *   - Utilities.formatDate(): SimpleDateFormat patterns (the letters the project uses; any
 *     other letter is an error here rather than a guess).
 */
'use strict';

const { execFileSync } = require('node:child_process');
const crypto = require('node:crypto');
const fs = require('node:fs');

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

/** The runtime's own probe of a Spreadsheet object (not an Apps Script method). */
const CHECK = Symbol('check');

/** SpreadsheetApp.ProtectionType. */
const ProtectionType = Object.freeze({ RANGE: enumValue('RANGE'), SHEET: enumValue('SHEET') });

/**
 * The type of a protected range of the Sheets API: SHEET when its range has no bounds ("The
 * range may be fully unbounded, in which case this is considered a protected sheet"), RANGE
 * otherwise (bounded, or backed by a named range).
 * https://developers.google.com/sheets/api/reference/rest/v4/spreadsheets/sheets#ProtectedRange
 */
function protectionTypeOf(p) {
  if (p.namedRangeId !== undefined || p.range === undefined) return ProtectionType.RANGE;
  const bounds = ['startRowIndex', 'endRowIndex', 'startColumnIndex', 'endColumnIndex'];
  return bounds.some((k) => p.range[k] !== undefined) ? ProtectionType.RANGE : ProtectionType.SHEET;
}

/**
 * Spreadsheet `spreadsheetId` at `apiBase` (…/v4/) as the account of `token` reads and writes
 * it: a Spreadsheet with its Sheets, Ranges and Protections; its toasts go to `toasts`.
 */
function openSpreadsheet({ apiBase, spreadsheetId, token, toasts }) {
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
    /** This sheet's protections of `type` (ProtectionType), whoever may edit them. */
    getProtections(type) {
      if (type !== ProtectionType.SHEET && type !== ProtectionType.RANGE) {
        throw new Error('Exception: Invalid argument: type');
      }
      const fields = encodeURIComponent('sheets.properties.sheetId,sheets.protectedRanges');
      const got = (api('GET', '?fields=' + fields).sheets || [])
        .find((s) => s.properties.sheetId === this.getSheetId()) || {};
      return (got.protectedRanges || []).filter((p) => protectionTypeOf(p) === type)
        .map((p) => protection(p));
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

  /** A Protection, from the API's ProtectedRange as this account reads it. */
  function protection(p) {
    return {
      canEdit: () => p.requestingUserCanEdit === true,
      isWarningOnly: () => p.warningOnly === true,
      getDescription: () => p.description || '',
      getProtectionType: () => protectionTypeOf(p),
      remove() {
        api('POST', ':batchUpdate', { requests: [{ deleteProtectedRange: { protectedRangeId: p.protectedRangeId } }] });
      },
    };
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
  // Whether the account may open the spreadsheet: one read, which throws when it may not.
  Object.defineProperty(spreadsheet, CHECK, { value: () => api('GET', '?fields=spreadsheetId') });

  return spreadsheet;
}

/**
 * The services of one execution of `project` (project.js), at `apiBase` (…/v4/):
 *   token          the access token of the account the script runs as;
 *   effectiveUser  that account's e-mail (Session.getEffectiveUser());
 *   activeUser     what Session.getActiveUser() gives ('' when hidden), or undefined where
 *                  this runtime does not know;
 *   authorized     whether the run has the script's authorisation (an installable trigger,
 *                  a run from the editor) or not (a simple trigger);
 *   project        the project: its kind (a container or none), its lasting state.
 */
function runtime({ apiBase, token, effectiveUser, activeUser, authorized, project }) {
  const toasts = [];
  const opened = new Map();
  /** Spreadsheet `id` as the running account sees it, one object per id in an execution. */
  function open(id) {
    if (!opened.has(id)) opened.set(id, openSpreadsheet({ apiBase, spreadsheetId: id, token, toasts }));
    return opened.get(id);
  }
  const container = project.container();

  /** A service call that needs the script's authorisation, which a simple trigger lacks. */
  function authorised(what, scope) {
    if (!authorized) {
      throw new Error('Exception: You do not have permission to call ' + what +
        '. Required permissions: ' + scope);
    }
  }
  const SCRIPTAPP_SCOPE = 'https://www.googleapis.com/auth/script.scriptapp';
  const SPREADSHEETS_SCOPE = 'https://www.googleapis.com/auth/spreadsheets';

  /** A lock that is a directory of the project's: had by whoever made it, until released. */
  function dirLock(lockPath) {
    let held = false;
    return {
      tryLock(ms) {
        const until = Date.now() + ms;
        for (;;) {
          try {
            fs.mkdirSync(lockPath);
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
        if (held) fs.rmdirSync(lockPath);
        held = false;
      },
    };
  }
  const documentLock = container === null ? null : dirLock(project.documentLockPath);
  const scriptLock = dirLock(project.scriptLockPath);

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
        /** A Spreadsheet, or its id ("forSpreadsheet(key)"). */
        forSpreadsheet(ss) {
          const sourceId = typeof ss === 'string' ? ss : ss.getId();
          return {
            onEdit() {
              return {
                create() {
                  const t = {
                    uid: String(crypto.randomInt(2 ** 47)), owner: effectiveUser, handler: String(handler),
                    eventType: 'ON_EDIT', sourceId,
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

  const active = () => (container === null ? null : open(container));
  const globals = {
    SpreadsheetApp: {
      getActive: active,
      getActiveSpreadsheet: active,
      openById(id) {
        authorised('SpreadsheetApp.openById', SPREADSHEETS_SCOPE);
        const ss = open(String(id));
        ss[CHECK]();
        return ss;
      },
      ProtectionType,
    },
    LockService: { getDocumentLock: () => documentLock, getScriptLock: () => scriptLock },
    PropertiesService: { getScriptProperties: () => scriptProperties },
    ScriptApp: scriptApp,
    Session: session,
    Utilities: { getUuid: () => crypto.randomUUID(), formatDate, sleep },
  };

  /**
   * The event of an edit that set `a1` of sheet `title` of spreadsheet `spreadsheetId` to
   * `value`, seen by this execution: `user` the e-mail it may see of the person who edited
   * ('' when hidden), `triggerUid` the installable trigger that fired (none for a simple
   * trigger). Its `source` is the spreadsheet edited, in a standalone project too.
   * https://developers.google.com/apps-script/guides/triggers/events#edit
   */
  function editEvent(spreadsheetId, title, a1, value, { user, triggerUid }) {
    const e = {
      authMode: authorized ? 'FULL' : 'LIMITED',
      range: rangeIn(open(spreadsheetId), title, a1),
      source: open(spreadsheetId),
      value: String(value).toUpperCase(),
      user: userObject(user),
    };
    if (triggerUid !== undefined) e.triggerUid = triggerUid;
    return e;
  }

  /** Releases every lock the execution holds, as Apps Script does when it ends. */
  function releaseLocks() {
    if (documentLock !== null) documentLock.releaseLock();
    scriptLock.releaseLock();
  }

  return { globals, toasts, editEvent, releaseLocks, project };
}

/** The range `a1` of sheet `title` of `spreadsheet` (which must have it). */
function rangeIn(spreadsheet, title, a1) {
  const sheet = spreadsheet.getSheetByName(title);
  if (sheet === null) throw new Error('no sheet ' + title);
  return sheet.getRange(a1);
}

module.exports = {
  runtime, openSpreadsheet, rangeIn, personToken, visibleEmail, formatDate, instantOfWallClock,
  wallClockMs, ProtectionType,
};

/**
 * The Apps Script services that Code.js calls, for Node, over the Sheets API v4 (the sheetq
 * emulator in tests): SpreadsheetApp's Spreadsheet, Sheet and Range, LockService's document
 * lock, Session and Utilities. Each call is one synchronous HTTP request, as each service
 * call of Apps Script is, so Code.js runs unmodified and in its own order.
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
 *   - Sheet.getDataRange(): A1 to the last row and column with content.
 *   - LockService.getDocumentLock(): one lock per document across every running script;
 *     waitLock(ms) throws when it is not had within ms.
 *     https://developers.google.com/apps-script/reference/lock/lock#waitLock(Integer)
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
const SCOPE = 'https://www.googleapis.com/auth/spreadsheets';

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

function base64url(data) {
  return Buffer.from(data).toString('base64url');
}

/** An access token for the service account of `key`, by the JWT bearer grant (RFC 7523). */
function accessToken(key) {
  const now = Math.floor(Date.now() / 1000);
  const header = base64url(JSON.stringify({ alg: 'RS256', typ: 'JWT', kid: key.private_key_id }));
  const claims = base64url(JSON.stringify({
    iss: key.client_email, scope: SCOPE, aud: key.token_uri, iat: now, exp: now + 3600,
  }));
  const signature = crypto.createSign('RSA-SHA256').update(header + '.' + claims)
    .sign(key.private_key, 'base64url');
  const body = new URLSearchParams({
    grant_type: 'urn:ietf:params:oauth:grant-type:jwt-bearer',
    assertion: header + '.' + claims + '.' + signature,
  }).toString();
  const r = httpSync('POST', key.token_uri,
    { 'content-type': 'application/x-www-form-urlencoded' }, body);
  if (r.status !== 200) throw new Error('token endpoint answered ' + r.status + ': ' + r.text);
  return JSON.parse(r.text).access_token;
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
 * The services, for the spreadsheet `spreadsheetId` at `apiBase` (…/v4/), called as the
 * service account of `credentials` (standing for the person who edits), `user` being that
 * person's e-mail, the document lock kept under `lockDir`.
 */
function runtime({ apiBase, spreadsheetId, credentials, user, lockDir }) {
  const key = JSON.parse(fs.readFileSync(credentials, 'utf8'));
  const token = accessToken(key);
  const toasts = [];

  function api(method, pathAndQuery, body) {
    const url = apiBase.replace(/\/$/, '') + '/spreadsheets/' + encodeURIComponent(spreadsheetId) +
      pathAndQuery;
    const headers = { authorization: 'Bearer ' + token };
    if (body !== undefined) headers['content-type'] = 'application/json';
    const r = httpSync(method, url, headers, body === undefined ? undefined : JSON.stringify(body));
    if (r.status !== 200) {
      throw new Error('Exception: Service Spreadsheets failed (' + method + ' ' + pathAndQuery +
        ' answered ' + r.status + '): ' + r.text);
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

  const lockPath = path.join(lockDir, 'document.lock');
  let held = false;
  const documentLock = {
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

  const globals = {
    SpreadsheetApp: { getActiveSpreadsheet: () => spreadsheet, openById: () => spreadsheet },
    LockService: { getDocumentLock: () => documentLock },
    Session: { getActiveUser: () => ({ getEmail: () => user }) },
    Utilities: { getUuid: () => crypto.randomUUID(), formatDate, sleep },
  };

  /** The event of a person setting `a1` of sheet `title` to `value` (which this writes first, as their edit did). */
  function edit(title, a1, value) {
    const sheet = spreadsheet.getSheetByName(title);
    if (sheet === null) throw new Error('no sheet ' + title);
    const range = sheet.getRange(a1);
    range.setValue(value);
    return { range, source: spreadsheet, value: String(value).toUpperCase(), user: { getEmail: () => user } };
  }

  return { globals, toasts, edit, documentLock };
}

module.exports = { runtime, formatDate, instantOfWallClock, wallClockMs };

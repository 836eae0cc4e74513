/**
 * sheetq's intake for a PANEL_V2 panel, as pure functions: the queue row a ▶ press becomes,
 * the duplicate guard, the resolution of the panel's target label, and the toast texts.
 *
 * Code.js calls these from the onEdit trigger; `node --test apps-script/` checks them. No
 * Apps Script service is used here, so both runtimes load this file unchanged. The layout
 * follows the daemon's defaults (sheetq.example.toml: [queue.headers], [queue.states],
 * [panel]); change both together.
 */

/** The hidden queue sheet. */
var QUEUE_SHEET = '_ジョブキュー';

/** Queue columns by role, as named in row 1 of the queue (found by name, in any order). */
var HEADERS = {
  jobId: 'jobId',
  receivedAt: '受付日時',
  requester: '依頼者',
  panelSheet: 'パネルシート名',
  panelRow: 'パネル行',
  target: '対象ラベル',
  fn: '機能ラベル',
  command: 'command',
  argsJson: 'argsJSON',
  flags: 'システムフラグ',
  state: '状態',
  startedAt: '開始日時',
  finishedAt: '終了日時',
  resultUrl: '結果URL',
  message: 'メッセージ',
  worker: 'ワーカー',
};

/** The 状態 words of a job that is not finished. */
var WAITING = '待機';
var RUNNING = '実行中';

/** Where things sit on a panel (1-based rows and columns). */
var PANEL = {
  marker: 'PANEL_V2',
  markerCell: 'G1',
  labelCell: 'G2',
  firstRow: 8,
  tickColumn: 1,
  functionColumn: 2,
  commandColumn: 8,
  argsColumn: 9,
  flagsColumn: 10,
};

/** The index sheet (▶パネル): found by its marker; a tick in column A asks for a panel. */
var INDEX = {
  marker: 'PANEL_INDEX',
  markerCell: 'G1',
  firstRow: 2,
  tickColumn: 1,
  labelColumn: 2,
};

/** The jobs a tick on the index becomes: sheetq's built-in panel job. */
var PANEL_JOB = {
  target: '▶パネル',
  fn: 'パネルを開く',
  command: 'sheetq.panels',
};

/** 1899-12-30 00:00, day 0 of a sheet's date serials. */
var SERIAL_EPOCH_MS = Date.UTC(1899, 11, 30);
var MS_PER_DAY = 86400000;

/**
 * The date serial a sheet shows for a wall-clock time given as milliseconds since
 * 1970-01-01 00:00 *on the sheet's clocks* (what sheetq writes for 受付日時).
 */
function serialOfWallClock(wallMs) {
  return (Math.round(wallMs) - SERIAL_EPOCH_MS) / MS_PER_DAY;
}

/**
 * Where each queue column is, from the header row: `{ index: {role: i}, width }`. Throws,
 * naming what is missing or doubled, when the header is not a sheetq queue header.
 */
function queueColumns(header) {
  var known = Object.keys(HEADERS).map(function (role) { return HEADERS[role]; });
  var at = {};
  header.forEach(function (name, i) {
    var n = String(name).trim();
    if (n === '') return;
    if (Object.prototype.hasOwnProperty.call(at, n)) {
      // A name repeated among people's own columns is theirs to keep, as sheetq keeps it.
      if (known.indexOf(n) < 0) return;
      throw new Error('queue header "' + n + '" appears twice in ' + QUEUE_SHEET + ' row 1');
    }
    at[n] = i;
  });
  var index = {};
  var missing = [];
  Object.keys(HEADERS).forEach(function (role) {
    var i = at[HEADERS[role]];
    if (i === undefined) missing.push(HEADERS[role]);
    else index[role] = i;
  });
  if (missing.length > 0) {
    throw new Error(QUEUE_SHEET + ' row 1 lacks the columns ' + missing.join(', ') +
      '; run `sheetq init` or fix the header');
  }
  var width = Math.max.apply(null, Object.keys(index).map(function (r) { return index[r]; })) + 1;
  return { index: index, width: width };
}

/**
 * The queue row of a press, laid out by `header`, exactly as sheetq's own intake writes it:
 * as wide as the right-most known column, 受付日時 a date serial, 状態 待機, the rest of the
 * columns sheetq fills later left empty.
 *
 * press: { jobId, wallMs, requester, panelSheet, panelRow, target, fn, command, argsJson,
 * flags }
 */
function queueRow(header, press) {
  var cols = queueColumns(header);
  var row = [];
  for (var i = 0; i < cols.width; i++) row.push('');
  function set(role, value) { row[cols.index[role]] = value; }
  set('jobId', press.jobId);
  set('receivedAt', serialOfWallClock(press.wallMs));
  set('requester', press.requester || '');
  set('panelSheet', press.panelSheet);
  set('panelRow', press.panelRow === undefined || press.panelRow === null ? '' : press.panelRow);
  set('target', press.target);
  set('fn', press.fn);
  set('command', press.command);
  set('argsJson', press.argsJson);
  set('flags', press.flags);
  set('state', WAITING);
  return row;
}

/** A queue row's target: its 対象ラベル, or its パネルシート名 when that is empty. */
function targetOf(row, cols) {
  var target = String(row[cols.index.target]).trim();
  return target !== '' ? target : String(row[cols.index.panelSheet]).trim();
}

/**
 * The duplicate guard: the 待機 or 実行中 row (of `rows`, the queue's data rows) for the same
 * target and function as a new press, or null.
 */
function duplicateOf(header, rows, target, fn) {
  var cols = queueColumns(header);
  for (var i = 0; i < rows.length; i++) {
    var r = rows[i];
    var state = String(r[cols.index.state]);
    if ((state === WAITING || state === RUNNING) &&
        targetOf(r, cols) === String(target).trim() &&
        String(r[cols.index.fn]).trim() === String(fn).trim()) {
      return r;
    }
  }
  return null;
}

/**
 * HH:mm of a 受付日時 cell: a date serial (sheetq writes those), or a Date (Apps Script reads
 * a date-formatted cell as one) put through `formatDate` (Utilities.formatDate in the sheet's
 * zone). Anything else: `--:--`.
 */
function receivedHHmm(value, formatDate) {
  if (typeof value === 'number' && isFinite(value)) {
    var wall = new Date(Math.round(value * MS_PER_DAY) + SERIAL_EPOCH_MS);
    return pad2(wall.getUTCHours()) + ':' + pad2(wall.getUTCMinutes());
  }
  if (value instanceof Date || Object.prototype.toString.call(value) === '[object Date]') {
    return formatDate(value);
  }
  return '--:--';
}

function pad2(n) {
  return (n < 10 ? '0' : '') + n;
}

/** The toast of a refused duplicate press, as sheetq's own intake words it. */
function duplicateMessage(header, existing, formatDate) {
  var cols = queueColumns(header);
  var who = String(existing[cols.index.requester]).trim() || '不明';
  return '既に実行中です（依頼: ' + who + ' / ' +
    receivedHHmm(existing[cols.index.receivedAt], formatDate) + '）';
}

/**
 * Whether the panel's target label names exactly one panel. `panels`: every sheet as
 * { title, marker, label } (its G1 and G2). Returns { ok: true } or { ok: false, message }.
 */
function resolveLabel(panels, label) {
  var l = String(label).trim();
  if (l === '') {
    return { ok: false, message: 'このパネルの対象ラベル（' + PANEL.labelCell + '）が空です。ラベルを入れてから押してください' };
  }
  var titles = panels
    .filter(function (p) { return String(p.marker).trim() === PANEL.marker && String(p.label).trim() === l; })
    .map(function (p) { return p.title; });
  if (titles.length > 1) {
    return { ok: false, message: '対象ラベル「' + l + '」が複数のパネルにあります（' + titles.join(', ') + '）。どれか一つに直してください' };
  }
  if (titles.length === 0) {
    return { ok: false, message: '対象ラベル「' + l + '」のパネルが見つかりません' };
  }
  return { ok: true };
}

/**
 * The press a tick on the index becomes: a panel job for that one target, exactly as
 * sheetq's own intake words it (one row per tick; sheetq groups the ticks of one poll).
 * press: { jobId, wallMs, requester, indexSheet, label }
 */
function indexPress(p) {
  return {
    jobId: p.jobId,
    wallMs: p.wallMs,
    requester: p.requester || '',
    panelSheet: p.indexSheet,
    panelRow: null,
    target: PANEL_JOB.target,
    fn: PANEL_JOB.fn + ': ' + String(p.label).trim(),
    command: PANEL_JOB.command,
    argsJson: JSON.stringify({ open: [String(p.label).trim()] }),
    flags: '',
  };
}

/**
 * Whether a waiting or running panel job (of `rows`, the queue's data rows) already asks
 * for the panel of `label`: its tick is then only cleared.
 */
function panelAsked(header, rows, label) {
  var cols = queueColumns(header);
  var l = String(label).trim();
  return rows.some(function (r) {
    var state = String(r[cols.index.state]);
    if (String(r[cols.index.command]).trim() !== PANEL_JOB.command) return false;
    if (state !== WAITING && state !== RUNNING) return false;
    try {
      var open = JSON.parse(String(r[cols.index.argsJson])).open;
      return Array.isArray(open) && open.some(function (o) { return String(o).trim() === l; });
    } catch (e) {
      return false;
    }
  });
}

/** The toast of an index tick taken in, and of one whose panel is already asked for. */
function panelQueuedMessage(label) {
  return 'パネル「' + label + '」を準備します。少し待ってから開いてください';
}

function panelAskedMessage(label) {
  return 'パネル「' + label + '」は準備中です';
}

/** The toast of a tick on an index row without a label. */
function noLabelMessage(row) {
  return row + ' 行目には対象がありません';
}

/** The toast of a tick on a row without a function label. */
function noFunctionMessage(row) {
  return row + ' 行目には機能がありません';
}

/** The toast of a press taken in. */
function queuedMessage(fn, target) {
  return '受け付けました: ' + fn + '（' + target + '）';
}

if (typeof module !== 'undefined') {
  module.exports = {
    QUEUE_SHEET: QUEUE_SHEET,
    HEADERS: HEADERS,
    PANEL: PANEL,
    INDEX: INDEX,
    PANEL_JOB: PANEL_JOB,
    indexPress: indexPress,
    panelAsked: panelAsked,
    panelQueuedMessage: panelQueuedMessage,
    panelAskedMessage: panelAskedMessage,
    noLabelMessage: noLabelMessage,
    WAITING: WAITING,
    RUNNING: RUNNING,
    serialOfWallClock: serialOfWallClock,
    queueColumns: queueColumns,
    queueRow: queueRow,
    duplicateOf: duplicateOf,
    duplicateMessage: duplicateMessage,
    receivedHHmm: receivedHHmm,
    resolveLabel: resolveLabel,
    noFunctionMessage: noFunctionMessage,
    queuedMessage: queuedMessage,
  };
}

/**
 * sheetq's intake for a PANEL_V2 panel, as pure functions: the queue row a ▶ press becomes,
 * the duplicate guard, the job a ■ (中止) tick asks to stop and the 中止要求 text it writes,
 * the job a 承認 tick approves and the 承認 text it writes, the resolution of the panel's
 * target label, who pressed, which kind of project takes a press (takesPresses), the plan of
 * installing or removing the standalone project's trigger, and the toast and log texts; and
 * the sheet-text rule (sheetTrim, compareSheetText) by which a value read from the sheet
 * names a fixed or configured word.
 *
 * shell.js calls these for both kinds of project (Code.js, the bound one; Trigger.js, the
 * standalone one); `node --test apps-script/` checks them. No Apps Script service is used
 * here, so Apps Script and Node load this file unchanged. The layout
 * follows the daemon's defaults (sheetq.example.toml: [queue.headers], [queue.states],
 * [panel]); change both together.
 */

/*
 * Sheet text against the config: the one written rule this script and the daemon
 * (src/sheet_text.rs) share, held to it by the same vectors (tests/vectors/sheet_text.json).
 * JavaScript's String.prototype.trim and Rust's str::trim disagree (U+0085 is whitespace to
 * Rust and not to JavaScript, U+FEFF the other way round), so neither is used on a value that
 * decides anything: a flag `continuation` + U+0085 passed this script's check and was read
 * as `continuation` by the daemon. A value read from the sheet names a fixed or configured
 * word only when it is the same text (sheetTrim, then equal code point for code point); one
 * that merely looks like it (compareSheetText) is never normalised into a match.
 */

/** Code points the skeleton drops: Unicode White_Space, controls (Cc) and format characters (Cf). */
var SHEET_TEXT_HIDDEN = /^[\p{White_Space}\p{Cc}\p{Cf}]$/u;

/** The value as text with U+0020 SPACE and U+0009 TAB removed at both ends, and nothing else. */
function sheetTrim(value) {
  var s = String(value);
  var start = 0;
  var end = s.length;
  while (start < end && (s.charAt(start) === ' ' || s.charAt(start) === '\t')) start++;
  while (end > start && (s.charAt(end - 1) === ' ' || s.charAt(end - 1) === '\t')) end--;
  return s.slice(start, end);
}

/** Whether two values are the same text: their sheetTrims equal code point for code point. */
function sameSheetText(value, configured) {
  return sheetTrim(value) === sheetTrim(configured);
}

/** Whether the one-code-point string `c` is White_Space, Cc or Cf: what the skeleton drops. */
function isHiddenChar(c) {
  return SHEET_TEXT_HIDDEN.test(c);
}

/** The one-code-point string `c` folded as the skeleton folds it: U+FF01–U+FF5E to ASCII, A–Z lowercased. */
function skeletonChar(c) {
  var cp = c.codePointAt(0);
  if (cp >= 0xFF01 && cp <= 0xFF5E) cp = cp - 0xFF01 + 0x21;
  if (cp >= 0x41 && cp <= 0x5A) cp += 0x20;
  return String.fromCodePoint(cp);
}

/**
 * What is left of a value for telling look-alikes: every White_Space, Cc and Cf code point
 * dropped, fullwidth forms U+FF01–U+FF5E folded to U+0021–U+007E, A–Z lowercased.
 */
function skeleton(value) {
  return Array.from(String(value))
    .filter(function (c) { return !isHiddenChar(c); })
    .map(skeletonChar)
    .join('');
}

/** `U+0085` for the one-code-point string `c`. */
function codePointLabel(c) {
  var hex = c.codePointAt(0).toString(16).toUpperCase();
  while (hex.length < 4) hex = '0' + hex;
  return 'U+' + hex;
}

/**
 * The sheet's `value` against the fixed or configured `configured`:
 *   { verdict: 'same', firstHidden: null }        the same text (sameSheetText);
 *   { verdict: 'lookalike', firstHidden }         not the same, but the skeletons are equal
 *                                                 and not empty; `firstHidden` ('U+0085') is
 *                                                 the first code point of `value` that the
 *                                                 skeleton dropped or changed, or null;
 *   { verdict: 'other', firstHidden: null }       anything else.
 */
function compareSheetText(value, configured) {
  var v = String(value);
  if (sameSheetText(v, configured)) return { verdict: 'same', firstHidden: null };
  var shape = skeleton(v);
  if (shape === '' || shape !== skeleton(configured)) return { verdict: 'other', firstHidden: null };
  // The first code point that is hidden, a fullwidth form, or not in the configured value
  // at all (another case): the one a refusal names.
  var first = null;
  var cfg = String(configured);
  Array.from(v).some(function (c) {
    var cp = c.codePointAt(0);
    if (isHiddenChar(c) || (cp >= 0xFF01 && cp <= 0xFF5E) || cfg.indexOf(c) < 0) {
      first = codePointLabel(c);
      return true;
    }
    return false;
  });
  return { verdict: 'lookalike', firstHidden: first };
}

/**
 * Whether `text` holds no White_Space, Cc or Cf code point but U+0020 and U+0009: text
 * that this script (splitting on JavaScript's \s) and sheetq (splitting on Unicode
 * White_Space) cut into the same words.
 */
function isPlainSheetText(text) {
  return !Array.from(String(text)).some(function (c) {
    return c !== ' ' && c !== '\t' && isHiddenChar(c);
  });
}

/** The システムフラグ that only sheetq writes (pressFlags). */
var CONTINUATION_FLAG = 'continuation';

/** The hidden queue sheet. */
var QUEUE_SHEET = '_ジョブキュー';

/** Queue columns by role, as named in row 1 of the queue (found by name, in any order). Required. */
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

/**
 * Queue columns a queue made by an older sheetq may lack, found by name like the others when
 * present. Without one, what it carries is not offered (`sheetq init` adds it).
 */
var OPTIONAL_HEADERS = {
  cancelRequest: '中止要求',
  approvals: '承認',
  inputs: '入力',
};

/**
 * The 状態 words of a job that is not finished. A job of a function with `approvers` waits
 * as 承認待ち until enough approvers tick 承認 (the daemon turns the 待機 a press writes into
 * it; the script does not know which functions need approval), and is never claimed until
 * then. Every other word (完了, エラー, タイムアウト, キャンセル, 却下 when an approver
 * stopped it, 期限切れ when no one approved it in time) is final: never a duplicate, never
 * stopped, never approved.
 */
var WAITING = '待機';
var RUNNING = '実行中';
var AWAITING_APPROVAL = '承認待ち';

/**
 * Whether a 状態 is that of a job not finished: waiting, awaiting approval, or running. The
 * whole cell is compared, not even spaces trimmed, as sheetq reads 状態 (StateWords::parse:
 * `待機 ` is unknown text it leaves alone), so that this script and sheetq agree on which
 * row is which job's.
 */
function isPending(state) {
  var s = String(state);
  return s === WAITING || s === AWAITING_APPROVAL || s === RUNNING;
}

/** Where things sit on a panel (1-based rows and columns). */
var PANEL = {
  marker: 'PANEL_V2',
  markerCell: 'G1',
  labelCell: 'G2',
  headerRow: 7,
  firstRow: 8,
  tickColumn: 1,
  functionColumn: 2,
  statusColumn: 3,
  cancelColumn: 6,
  commandColumn: 8,
  argsColumn: 9,
  flagsColumn: 10,
  approveColumn: 11,
  /** Hidden: the function's inputs as `[[name, label], …]`, written by `panels sync`. */
  inputsColumn: 7,
};

/**
 * The inputs a press takes from its panel row (`cells`, the whole row): for each of the
 * function's inputs in `spec` (its hidden inputs cell, `[[name, label, column], …]`, which
 * `panels sync` writes and protects), the value in `column` (1-based) when the cell left of
 * it shows the input's label, as sheetq's poll intake reads it: a Date as its day
 * `yyyy-MM-dd` (through `formatDate`, Utilities.formatDate in the sheet's zone), booleans
 * and numbers as they are, text trimmed of spaces and tabs; an empty cell left out, so the
 * input's default applies. Values are checked by the daemon when it admits the job, as every
 * job's args are. `{ ok: false, message }` when a label is not where the spec puts it: a
 * value is never guessed, and never found by a header anyone may edit.
 */
function pressInputs(cells, spec, formatDate) {
  var text = sheetTrim(spec === undefined || spec === null ? '' : spec);
  if (text === '') return { ok: true, inputs: {}, text: '' };
  var entries;
  try {
    entries = JSON.parse(text);
  } catch (err) {
    entries = null;
  }
  if (!Array.isArray(entries)) return { ok: false, message: missingInputMessage('inputs') };
  var inputs = {};
  for (var n = 0; n < entries.length; n++) {
    var entry = entries[n];
    var name = String(entry[0]);
    var label = String(entry[1]);
    var col = Number(entry[2]) - 1;
    if (!(col >= 1) || sheetTrim(cells[col - 1] === undefined ? '' : cells[col - 1]) !== sheetTrim(label)) {
      return { ok: false, message: missingInputMessage(label) };
    }
    var value = cells[col];
    if (isDate(value)) {
      inputs[name] = formatDate(value);
    } else if (typeof value === 'boolean' || (typeof value === 'number' && isFinite(value))) {
      inputs[name] = value;
    } else if (value !== undefined && value !== null && sheetTrim(value) !== '') {
      inputs[name] = sheetTrim(value);
    }
  }
  return { ok: true, inputs: inputs, text: inputsText(entries, inputs) };
}

/**
 * The inputs as one line for people (`version=1.2.4, dry_run=true`), in the order the
 * function lists them, as sheetq words them.
 */
function inputsText(pairs, inputs) {
  return pairs
    .map(function (pair) { return String(pair[0]); })
    .filter(function (name) { return Object.prototype.hasOwnProperty.call(inputs, name); })
    .map(function (name) {
      var v = inputs[name];
      var s = typeof v === 'string' ? v : JSON.stringify(v);
      // As sheetq words it: plain while unmistakable, else quoted and cut, so that no value
      // passes for another input's.
      var plain = Array.from(s).length <= 40 && !/[,="\p{Cc}\p{Cf}]/u.test(s);
      if (!plain) {
        var head = Array.from(s);
        s = JSON.stringify(head.slice(0, 40).join('')).slice(0, -1) + (head.length > 40 ? '…"' : '"');
      }
      return name + '=' + s;
    })
    .join(', ');
}

/**
 * The value cells a press puts back to their defaults (`reset_inputs`): `{ column (1-based),
 * value }` for each entry of the hidden inputs cell `spec` that carries a fourth item, its
 * default as `panels sync` writes it.
 */
function inputResets(spec) {
  var entries;
  try {
    entries = JSON.parse(sheetTrim(spec === undefined || spec === null ? '' : spec) || '[]');
  } catch (err) {
    return [];
  }
  if (!Array.isArray(entries)) return [];
  var out = [];
  entries.forEach(function (entry) {
    if (!Array.isArray(entry) || entry.length < 4 || !(Number(entry[2]) >= 2)) return;
    out.push({ column: Number(entry[2]), value: entry[3] });
  });
  return out;
}

/** The args of a press: the panel's hidden argsJSON with the inputs merged over it. */
function argsWithInputs(argsJson, inputs) {
  if (Object.keys(inputs).length === 0) return argsJson;
  var args;
  try {
    args = JSON.parse(sheetTrim(argsJson) === '' ? '{}' : argsJson);
  } catch (err) {
    args = null;
  }
  // Not an object: left as it is, and the daemon refuses the job as it refuses any args
  // it cannot read (the inputs are not put where they would mean something else).
  if (args === null || typeof args !== 'object' || Array.isArray(args)) return argsJson;
  Object.keys(inputs).forEach(function (k) {
    args[k] = inputs[k];
  });
  return JSON.stringify(args);
}

/** The toast of a press whose row holds another function by the time its inputs are read. */
function movedRowMessage(fn) {
  return '「' + fn + '」の行が押した後に動いたため受け付けませんでした。もう一度押してください';
}

/** The toast of a press whose row does not show input `label` where `panels sync` puts it. */
function missingInputMessage(label) {
  return '入力「' + label + '」が見当たらないため受け付けませんでした（sheetq panels sync で入力欄が作り直されます）';
}

/**
 * Whether a panel header names a column of 承認 boxes: 承認 itself, or 承認 and the
 * approver's number (承認 2, 承認 3, …) as `panels sync` writes them.
 */
function isApprovalHeader(text) {
  return /^承認( [0-9]+)?$/.test(sheetTrim(text));
}

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
 * Where each queue column is, from the header row: `{ index: {role: i}, width }`, `width`
 * reaching the right-most known column. An optional column (OPTIONAL_HEADERS) the queue lacks
 * has no index. Throws, naming what is missing or doubled, when the header is not a sheetq
 * queue header.
 */
function queueColumns(header) {
  var known = [HEADERS, OPTIONAL_HEADERS].reduce(function (names, group) {
    return names.concat(Object.keys(group).map(function (role) { return group[role]; }));
  }, []);
  var at = {};
  header.forEach(function (name, i) {
    // The sheet-text trim: a header that differs from a known one by any other character is
    // one of people's own columns, never taken for the known one.
    var n = sheetTrim(name);
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
  Object.keys(OPTIONAL_HEADERS).forEach(function (role) {
    var i = at[OPTIONAL_HEADERS[role]];
    if (i !== undefined) index[role] = i;
  });
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
  // 入力, for people (a queue made before it has none): the job runs on argsJSON.
  if (cols.index.inputs !== undefined) set('inputs', press.inputs || '');
  set('state', WAITING);
  return row;
}

/** A queue row's target: its 対象ラベル, or its パネルシート名 when that is empty. */
function targetOf(row, cols) {
  var target = sheetTrim(row[cols.index.target]);
  return target !== '' ? target : sheetTrim(row[cols.index.panelSheet]);
}

/**
 * The duplicate guard: the 待機, 承認待ち or 実行中 row (of `rows`, the queue's data rows) for
 * the same target and function as a new press, or null.
 */
function duplicateOf(header, rows, target, fn) {
  var cols = queueColumns(header);
  for (var i = 0; i < rows.length; i++) {
    var r = rows[i];
    if (isPending(r[cols.index.state]) &&
        targetOf(r, cols) === sheetTrim(target) &&
        sameSheetText(r[cols.index.fn], fn)) {
      return r;
    }
  }
  return null;
}

/**
 * What the panel row of a press just queued says at once, in sheetq's own words (the
 * daemon's claim::waiting_text, which takes over at its next write): how many jobs of its
 * target go before it, the running one included (a target runs one job at a time), or that
 * it was received and waits to start when none does. `rows` are the queue's rows before it.
 */
function pressStatus(header, rows, target) {
  var cols = queueColumns(header);
  var ahead = rows.filter(function (r) {
    var s = String(r[cols.index.state]);
    return (s === WAITING || s === RUNNING) && targetOf(r, cols) === sheetTrim(target);
  }).length;
  return ahead === 0 ? RECEIVED_TEXT : '⏳ 順番待ち (前に ' + ahead + ' 件)';
}

/**
 * How long the daemons' heartbeat rows may stay unchanged, on this script's clock (Google's),
 * before a press says that no daemon answers: sheetq's default `dead_after`. A daemon writes
 * its row every `heartbeat_interval` (30 s by default).
 */
var NO_DAEMON_AFTER_MS = 2 * 60 * 1000;

/** The status of a press while no daemon's heartbeat has changed for NO_DAEMON_AFTER_MS. */
var NO_DAEMON_TEXT = '⏳ 受付済み (sheetq が止まっています: 2 分以上応答なし)';

/** The script property keeping what the heartbeat rows showed, and since when. */
var HEARTBEAT_PROPERTY = 'SHEETQ_HEARTBEATS_SEEN';

/** First heartbeat row of `_ワーカー` (row 1: the lease; row 2: the heartbeats' header). */
var HEARTBEAT_FIRST_ROW = 3;

/**
 * Whether a daemon is alive, judged on this script's clock alone: the heartbeat rows' text now
 * (`signature`) against what an earlier run saw (`seen`: { sig, since }, since = when it was
 * first seen, in ms of this clock) at `nowMs`. No daemon's clock is read: a heartbeat row is
 * only compared with itself. Returns { alive, seen }: `alive` true when the rows changed
 * within NO_DAEMON_AFTER_MS, false when they have not changed for longer, null when that
 * cannot be told (a first look, or a change seen only after a long while); `seen` is the
 * record to keep.
 */
function daemonLiveness(seen, signature, nowMs) {
  var known = seen !== null && typeof seen === 'object' && typeof seen.since === 'number';
  if (!known || seen.sig !== signature) {
    return {
      alive: known && nowMs - seen.since <= NO_DAEMON_AFTER_MS ? true : null,
      seen: { sig: signature, since: nowMs },
    };
  }
  return { alive: nowMs - seen.since > NO_DAEMON_AFTER_MS ? false : null, seen: seen };
}

/** The index's header of a target's 状況 column, found by name. */
var INDEX_STATE_HEADER = '状況';

/**
 * The index's 状況 of `target` from the queue's data rows, in the words of sheetq's
 * (panel/index_sheet.rs, state_text): its running job and how many wait, and how many await
 * approval; followed by 「 · sheetq 停止中」 while no daemon answers (`alive` false).
 */
function indexStateText(header, rows, target, alive) {
  var cols = queueColumns(header);
  var running = [];
  var waiting = 0;
  var awaiting = 0;
  rows.forEach(function (r) {
    if (targetOf(r, cols) !== sheetTrim(target)) return;
    var s = String(r[cols.index.state]);
    if (s === RUNNING) running.push(sheetTrim(r[cols.index.fn]));
    else if (s === WAITING) waiting += 1;
    else if (s === AWAITING_APPROVAL) awaiting += 1;
  });
  var text;
  if (running.length === 0) text = waiting === 0 ? '' : '⏳ 待機 ' + waiting + ' 件';
  else text = '▶ 実行中: ' + running[0] + (waiting === 0 ? '' : ' (待機 ' + waiting + ' 件)');
  if (awaiting > 0) {
    text = text === '' ? '🙋 承認待ち ' + awaiting + ' 件' : text + ' · 承認待ち ' + awaiting + ' 件';
  }
  if (alive === false && text !== '') text += ' · sheetq 停止中';
  return text;
}

/** The status of a press that nothing of its target goes before (claim::RECEIVED_TEXT). */
var RECEIVED_TEXT = '⏳ 受付済み (開始待ち)';

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
  if (isDate(value)) return formatDate(value);
  return '--:--';
}

/** Whether a cell value is a Date (of this realm or Apps Script's). */
function isDate(value) {
  return value instanceof Date || Object.prototype.toString.call(value) === '[object Date]';
}

function pad2(n) {
  return (n < 10 ? '0' : '') + n;
}

/**
 * The toast of a refused duplicate press, as sheetq's own intake words it; a press whose
 * earlier job awaits approval is told that it does, and by whom and when it was asked.
 */
function duplicateMessage(header, existing, formatDate) {
  var cols = queueColumns(header);
  var who = String(existing[cols.index.requester]).trim() || '不明';
  var lead = String(existing[cols.index.state]) === AWAITING_APPROVAL ? '承認待ちです' : '既に実行中です';
  return lead + '（依頼: ' + who + ' / ' +
    receivedHHmm(existing[cols.index.receivedAt], formatDate) + '）';
}

/**
 * Whether the panel's target label names exactly one panel. `panels`: every sheet as
 * { title, marker, label } (its G1 and G2). Returns { ok: true } or { ok: false, message }.
 */
function resolveLabel(panels, label) {
  var l = sheetTrim(label);
  if (l === '') {
    return { ok: false, message: 'このパネルの対象ラベル（' + PANEL.labelCell + '）が空です。ラベルを入れてから押してください' };
  }
  var titles = panels
    .filter(function (p) { return sameSheetText(p.marker, PANEL.marker) && sheetTrim(p.label) === l; })
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
    fn: PANEL_JOB.fn + ': ' + sheetTrim(p.label),
    command: PANEL_JOB.command,
    argsJson: JSON.stringify({ open: [sheetTrim(p.label)] }),
    flags: '',
  };
}

/**
 * Whether a waiting or running panel job (of `rows`, the queue's data rows) already asks
 * for the panel of `label`: its tick is then only cleared.
 */
function panelAsked(header, rows, label) {
  var cols = queueColumns(header);
  var l = sheetTrim(label);
  return rows.some(function (r) {
    var state = String(r[cols.index.state]);
    if (!sameSheetText(r[cols.index.command], PANEL_JOB.command)) return false;
    if (state !== WAITING && state !== RUNNING) return false;
    try {
      var open = JSON.parse(String(r[cols.index.argsJson])).open;
      return Array.isArray(open) && open.some(function (o) { return sheetTrim(o) === l; });
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

/** The toast of a tick while the spreadsheet has no queue sheet. */
function noQueueMessage() {
  return QUEUE_SHEET + ' がありません。`sheetq init` を実行してください';
}

/**
 * The block of ■ boxes an edit covers: the edited block (`height` × `width` cells from row
 * `top`, column `left`) within a panel's ■ column from its first function row, as
 * { first, count } rows, or null when it covers none. A paste over a whole row covers one.
 */
function cancelCells(top, left, height, width) {
  if (left > PANEL.cancelColumn || left + width - 1 < PANEL.cancelColumn) return null;
  var first = Math.max(top, PANEL.firstRow);
  var last = top + height - 1;
  return last < first ? null : { first: first, count: last - first + 1 };
}

/**
 * A 受付日時 cell as a date serial, to tell which job is newer: a serial as it is, a Date
 * (a date-formatted cell, as Apps Script reads it) by `wallMsOf`, its wall clock in the
 * sheet's zone as serialOfWallClock takes it. Anything else is older than every date.
 */
function receivedSerial(value, wallMsOf) {
  if (typeof value === 'number' && isFinite(value)) return value;
  if (isDate(value)) return serialOfWallClock(wallMsOf(value));
  return -Infinity;
}

/**
 * The job a ■ tick on the panel row of `fn` asks to stop: the index in `rows` (the queue's
 * data rows) of the newest 待機, 承認待ち or 実行中 row for that target and function, or null
 * (newestJobOf). A finished job (完了, エラー, タイムアウト, キャンセル, 却下, 期限切れ) is
 * never stopped.
 */
function cancelTargetOf(header, rows, target, fn, wallMsOf) {
  return newestJobOf(header, rows, target, fn, wallMsOf, isPending);
}

/**
 * The job a 承認 tick on the panel row of `fn` approves: the index in `rows` of the newest
 * 承認待ち row for that target and function, or null (newestJobOf). A job waiting or running
 * already needs no approval, and a finished one takes none.
 */
function approvalTargetOf(header, rows, target, fn, wallMsOf) {
  return newestJobOf(header, rows, target, fn, wallMsOf, function (state) {
    return String(state) === AWAITING_APPROVAL;
  });
}

/**
 * The index in `rows` (the queue's data rows) of the newest row for `target` and `fn` whose
 * 状態 `wanted` accepts (by 受付日時, read with receivedSerial; on a tie the lower row), or
 * null. A panel without a label has no jobs: ▶ queues none for it.
 */
function newestJobOf(header, rows, target, fn, wallMsOf, wanted) {
  var cols = queueColumns(header);
  var t = sheetTrim(target);
  var f = sheetTrim(fn);
  if (t === '') return null;
  var found = null;
  var newest = -Infinity;
  rows.forEach(function (r, i) {
    if (!wanted(r[cols.index.state]) || targetOf(r, cols) !== t ||
        sheetTrim(r[cols.index.fn]) !== f) {
      return;
    }
    var at = receivedSerial(r[cols.index.receivedAt], wallMsOf);
    if (found === null || at >= newest) {
      found = i;
      newest = at;
    }
  });
  return found;
}

/**
 * The 中止要求 text of a ■ tick: who ticked (requesterOf; 不明 when Google does not say),
 * then `time`, the moment formatted `yyyy/MM/dd HH:mm:ss` in the spreadsheet's zone, then
 * `#<jobId>` of the job it is meant for. sheetq reads the words before the `#` as who, date
 * and time, and honours the request only on the row of that job: a sort that moves rows
 * between the script's read and its write leaves the request on a row it stops nothing on.
 * Each line of a 承認 cell is worded the same, by the one who approved (approvalPlan).
 */
function cancelRequestText(who, time, jobId) {
  var w = who === undefined || who === null ? '' : String(who).trim();
  return (w === '' ? '不明' : w) + ' ' + time + ' #' + jobId;
}

/** Whether the 中止要求 text `asked` asks to stop `jobId`: it names that job, or none. */
function cancelAppliesTo(asked, jobId) {
  var words = asked.split(/\s+/);
  var last = words[words.length - 1];
  return !(last.length > 1 && last.charAt(0) === '#') || last.slice(1) === String(jobId);
}

/**
 * What a ■ tick on the panel row of `fn` does, from the queue as just read (`header`, `rows`
 * its data rows): `{ message }`, the toast, and when a request is to be written also
 * `{ index, column, jobId }`: write it into `rows[index]`, 0-based column `column` (its
 * 中止要求), for job `jobId`. A request for that job already there is kept (one a sort left
 * there for another job is not one); a queue without 中止要求 is left as it is.
 */
function cancelPlan(header, rows, target, fn, wallMsOf) {
  var i = cancelTargetOf(header, rows, target, fn, wallMsOf);
  if (i === null) return { message: nothingToCancelMessage(fn) };
  var cols = queueColumns(header);
  var column = cols.index.cancelRequest;
  if (column === undefined) return { message: noCancelColumnMessage() };
  var jobId = String(rows[i][cols.index.jobId]);
  var asked = rows[i][column];
  asked = asked === undefined || asked === null ? '' : sheetTrim(asked);
  // A request there is kept only when sheetq reads it as this script does: plain text
  // (sheetq trims and splits 中止要求 on Unicode White_Space, this script on JavaScript's \s,
  // and they part on U+0085, U+FEFF…). Any other text is written over with a request naming
  // the job, so that a ■ tick is never swallowed by a cell sheetq takes for no request.
  if (asked !== '' && isPlainSheetText(asked) && cancelAppliesTo(asked, jobId)) {
    return { message: cancelAskedMessage(fn, asked) };
  }
  return {
    index: i,
    column: column,
    jobId: jobId,
    message: cancelRequestedMessage(fn, String(rows[i][cols.index.state])),
  };
}

/**
 * The toast of a stop asked for, by the 状態 the job had: a waiting job never starts, nor
 * does one awaiting approval (sheetq ends it 却下 when an approver asked, else キャンセル).
 */
function cancelRequestedMessage(fn, state) {
  var what;
  if (state === RUNNING) what = '実行中のジョブを止めます';
  else if (state === AWAITING_APPROVAL) what = '承認待ちのジョブは実行されません';
  else what = '待機中のジョブは実行されません';
  return '中止を要求しました: ' + fn + '（' + what + '）';
}

/** The toast of a ■ tick on a job whose stop is asked already: who asked and when (`asked`). */
function cancelAskedMessage(fn, asked) {
  return '既に中止を要求済みです: ' + fn + '（要求: ' + asked + '）';
}

/** The toast of a ■ tick on a function with no waiting, awaiting or running job. */
function nothingToCancelMessage(fn) {
  return fn + ' に中止できるジョブはありません（待機中・承認待ち・実行中のジョブがありません）';
}

/** The toast of a ■ tick on a queue made before 中止要求 existed. */
function noCancelColumnMessage() {
  return '中止できません: ' + QUEUE_SHEET + ' に「' + OPTIONAL_HEADERS.cancelRequest +
    '」列がありません。`sheetq init` を実行すると追加されます';
}

/**
 * The lines of a 承認 cell: one approval each (`<who> yyyy/MM/dd HH:mm:ss #<jobId>`, as
 * cancelRequestText words it), trimmed of spaces and tabs only (sheetTrim), blank ones left
 * out. The lines are written back: a wider trim would rewrite a line sheetq does not count
 * (`#<jobId>` + U+FEFF) into one it counts.
 */
function approvalLines(text) {
  var t = text === undefined || text === null ? '' : String(text);
  return t.split(/\r?\n/).map(sheetTrim)
    .filter(function (l) { return l !== ''; });
}

/**
 * Whether 承認 line `line` is `who`'s approval of `jobId`: it names that job, or none (as
 * cancelAppliesTo reads 中止要求, and as sheetq counts it), and the words before its date
 * and time are `who`, compared case-blind as sheetq compares people. A line that names
 * another job (a sort left it on this row) is no approval of this one.
 */
function approvalBy(line, who, jobId) {
  // Only plain text is read as sheetq reads it (isPlainSheetText): any other line is no
  // approval to the script, which then adds one sheetq counts (it counts a person once).
  if (!isPlainSheetText(line)) return false;
  var words = line.split(/\s+/);
  var last = words[words.length - 1];
  // Only a line naming this job counts, as sheetq counts them (approval::entries).
  if (last !== '#' + String(jobId)) return false;
  var before = words.slice(0, -3);
  return before.length > 0 && before.join(' ').toLowerCase() === String(who).trim().toLowerCase();
}

/**
 * What a 承認 tick on the panel row of `fn` does, from the queue as just read (`header`,
 * `rows` its data rows), ticked by `who` (requesterOf) at `time` (formatted as for
 * cancelRequestText): `{ message }`, the toast, and when an approval is to be written also
 * `{ index, column, jobId, text }`: write `text` into `rows[index]`, 0-based column `column`
 * (its 承認), for job `jobId`. `text` is the lines the cell holds (approvalLines), then
 * `who`'s.
 *
 * The script writes nothing that could never count: no approval by no one (Google did not
 * say who ticked), none by the job's own 依頼者 (case-blind), none twice by one person for
 * one job. Whether `who` is an approver of the function is sheetq's to check: the script
 * does not know the config, and a line by anyone else is written and never counted.
 */
function approvalPlan(header, rows, target, fn, who, time, wallMsOf) {
  var i = approvalTargetOf(header, rows, target, fn, wallMsOf);
  if (i === null) return { message: nothingToApproveMessage(fn) };
  var cols = queueColumns(header);
  var column = cols.index.approvals;
  if (column === undefined) return { message: noApprovalColumnMessage() };
  var w = who === undefined || who === null ? '' : String(who).trim();
  if (w === '') return { message: unknownApproverMessage() };
  // People are left to JavaScript's trim and case: these checks grant nothing, they only
  // spare a line that could never count; sheetq decides which approvals count, and whose
  // (approval::tally, same_person).
  var requester = String(rows[i][cols.index.requester]).trim();
  if (requester === '') return { message: unknownRequesterMessage(fn) };
  if (requester.toLowerCase() === w.toLowerCase()) return { message: selfApprovalMessage(fn) };
  var jobId = String(rows[i][cols.index.jobId]);
  var lines = approvalLines(rows[i][column]);
  if (lines.some(function (l) { return approvalBy(l, w, jobId); })) {
    return { message: alreadyApprovedMessage(fn, w) };
  }
  return {
    index: i,
    column: column,
    jobId: jobId,
    text: lines.concat([cancelRequestText(w, time, jobId)]).join('\n'),
    message: approvedMessage(fn, w),
  };
}

/** The toast of an approval written: sheetq counts it once it finds `who` among the approvers. */
function approvedMessage(fn, who) {
  return '承認を記録しました: ' + fn + '（' + who + '）。' +
    'sheetq が承認者かどうかを確かめ、承認者の承認だけを数えます';
}

/**
 * The toast of a 承認 tick on a job whose 依頼者 is empty (Google did not name the person who
 * pressed): nobody can be told apart from them, so sheetq counts no approval of it.
 */
function unknownRequesterMessage(fn) {
  return '承認できません: ' + fn + ' の依頼者が分からないため、依頼者以外の承認かを確かめられません';
}

/** The toast of a 承認 tick by the person who asked for the job. */
function selfApprovalMessage(fn) {
  return '自分の依頼は承認できません: ' + fn + '（依頼者以外の承認者が承認してください）';
}

/** The toast of a 承認 tick by someone whose approval of the job is there already. */
function alreadyApprovedMessage(fn, who) {
  return '既に承認済みです: ' + fn + '（' + who + '）';
}

/** The toast of a 承認 tick on a function with no job awaiting approval. */
function nothingToApproveMessage(fn) {
  return fn + ' に承認待ちのジョブはありません';
}

/** The toast of a 承認 tick on a queue made before 承認 existed. */
function noApprovalColumnMessage() {
  return '承認できません: ' + QUEUE_SHEET + ' に「' + OPTIONAL_HEADERS.approvals +
    '」列がありません。`sheetq init` を実行すると追加されます';
}

/**
 * The toast of a 承認 tick whose event does not say who ticked (requesterOf): an approval by
 * no one cannot count. Google tells the script only of people of the trigger owner's Google
 * Workspace domain; the queue an approval counts on is protected, which only the
 * standalone project's installable trigger writes.
 */
function unknownApproverMessage() {
  return '承認できません: Google が押した人をスクリプトに知らせなかったため、誰の承認か分かりません。' +
    '承認は、オーナーがスタンドアロン プロジェクトで installSheetqTrigger を実行して入れたトリガーが、その所有者と同じ Google Workspace ドメインの人の分だけ記録できます';
}

/**
 * Who pressed, for 依頼者: the e-mail of the edit event's `user`, or '' when Google does not
 * say. Google fills it for the spreadsheet's own Workspace domain and leaves it blank
 * otherwise ("A User object, representing the active user, if available (depending on a
 * complex set of security restrictions)",
 * https://developers.google.com/apps-script/guides/triggers/events#edit; the rules are
 * those of User.getEmail(), https://developers.google.com/apps-script/reference/base/user#getEmail()).
 * Never a guess: in an installable trigger the script runs as the trigger's owner, so
 * anything but the event would name the owner for everyone.
 */
function requesterOf(e) {
  var user = e && e.user;
  if (user === undefined || user === null) return '';
  var email = typeof user.getEmail === 'function' ? user.getEmail() : user;
  return email === undefined || email === null ? '' : String(email).trim();
}

/**
 * The two kinds of Apps Script project that take presses (README.md, "The Apps Script
 * intake"; apps-script/runtime/project.js loads each kind's files):
 *   bound       the project of the spreadsheet (Extensions → Apps Script): intake.js,
 *               shell.js, Code.js. Google shares it with every editor of the spreadsheet,
 *               so any of them can rewrite it; it keeps only the simple trigger `onEdit`,
 *               which runs as the person who edited and grants nothing.
 *   standalone  a project of its own (script.google.com, `clasp create --type standalone`),
 *               owned by the spreadsheet's owner and shared with no one: intake.js,
 *               shell.js, Trigger.js. Its installable trigger, made with
 *               forSpreadsheet(id), runs onSheetqEdit as that owner
 *               (https://developers.google.com/apps-script/guides/projects#create_a_standalone_project,
 *               https://developers.google.com/apps-script/reference/script/spreadsheet-trigger-builder).
 */
var INTAKE = {
  bound: 'bound',
  standalone: 'standalone',
};

/**
 * Whether the intake of `kind` takes presses, given whether `_ジョブキュー` carries a
 * protection (shell.js, queueProtected; warning-only ones count: Sheet.getProtections lists
 * them):
 * the standalone trigger serves a protected queue, the bound simple trigger an open one.
 * Both fire on every edit, Google documents no order between them, and each runs under its
 * own lock (the bound project's document lock, the standalone project's script lock: no
 * execution holds both), so only this split keeps one press from being queued twice. On a
 * protected queue the bound trigger would be refused for everyone but the owner and the
 * protection's editors, and for the owner it would write a second row beside the standalone
 * trigger's; on an open queue every editor can write any row by hand, so the standalone
 * trigger's 依頼者 would vouch for nothing.
 */
function takesPresses(kind, queueProtected) {
  return kind === INTAKE.standalone ? queueProtected === true : queueProtected !== true;
}

/**
 * The log line of a standalone trigger that leaves a press alone because `_ジョブキュー` is
 * not protected (takesPresses): seen by the project's owner under Executions.
 */
function openQueueStandDownMessage() {
  return 'sheetq: ' + QUEUE_SHEET + ' は保護されていないため、この押下はスタンドアロンのトリガーでは受け付けません' +
    '（開いたキューはバインドされたスクリプトの単純トリガーが受け付けます）。`sheetq init` でキューを保護してください';
}

/**
 * The installable-trigger intake of the standalone project: its handler, the script property
 * that says it is installed (its value is the e-mail of the account that owns the trigger),
 * and the script property that names the spreadsheet it serves. In a bound project the owner
 * property is what an earlier version's bound installable trigger left (legacyTriggerMessage).
 * Script properties are one store for every user of a project, and a simple trigger may read
 * them (AuthMode.LIMITED; https://developers.google.com/apps-script/reference/script/auth-mode).
 */
var TRIGGER = {
  handler: 'onSheetqEdit',
  eventType: 'ON_EDIT',
  ownerProperty: 'SHEETQ_TRIGGER_OWNER',
  spreadsheetProperty: 'SHEETQ_SPREADSHEET_ID',
};

/** Whether a script property value records a trigger's owner (null when unset, blank). */
function ownerRecorded(value) {
  return value !== null && value !== undefined && String(value).trim() !== '';
}

/** Whether two e-mail addresses name one account (Google compares them without case). */
function sameAccount(a, b) {
  var x = String(a === null || a === undefined ? '' : a).trim().toLowerCase();
  return x !== '' && x === String(b === null || b === undefined ? '' : b).trim().toLowerCase();
}

/**
 * What the bound project says while it still holds SHEETQ_TRIGGER_OWNER: an earlier version
 * installed a bound installable trigger as `owner`, which runs whatever code the bound
 * project holds (any editor's) with the owner's rights. Bound Code.js has no onSheetqEdit any
 * more, so that trigger now finds no handler and does nothing, until someone writes one. Only
 * the owner can delete it, in the Triggers page of the bound project, never by running bound
 * code (running bound code as the owner is the hole itself).
 */
function legacyTriggerMessage(owner) {
  return 'sheetq: このスプレッドシートの Apps Script（バインドされたプロジェクト）に、以前 installSheetqTrigger で入れた ' +
    String(owner).trim() + ' のトリガー（' + TRIGGER.handler + '）が残っています。' +
    'バインドされたプロジェクトは編集者の誰もが書き換えられ、このトリガーは書き換えられたコードを ' + String(owner).trim() +
    ' の権限で動かします。' + String(owner).trim() + ' が、拡張機能 → Apps Script の「トリガー」（Triggers）でこのトリガーを削除し、' +
    '「プロジェクトの設定」（Project Settings）→「スクリプト プロパティ」で ' + TRIGGER.ownerProperty + ' を削除してから、' +
    'README「The Apps Script intake」のとおりスタンドアロン プロジェクトで installSheetqTrigger を実行してください。' +
    'バインドされたプロジェクトの関数は実行しないでください';
}

/**
 * The spreadsheet id a standalone project's SHEETQ_SPREADSHEET_ID holds ({ id }), or why it
 * holds none ({ problem }, naming the property and where to set it). The spreadsheet's URL is
 * taken too: the id is its part between /d/ and the next slash.
 */
function spreadsheetIdOf(value) {
  var v = value === null || value === undefined ? '' : String(value).trim();
  if (v === '') return { problem: missingSpreadsheetIdMessage() };
  var inUrl = /\/spreadsheets\/d\/([^/?#]+)/.exec(v);
  var id = inUrl !== null ? inUrl[1] : v;
  if (!/^[A-Za-z0-9_-]+$/.test(id)) {
    return {
      problem: 'スクリプト プロパティ ' + TRIGGER.spreadsheetProperty + ' の値 ' + JSON.stringify(v.slice(0, 100)) +
        ' はスプレッドシートの ID ではありません。' + whereToSetSpreadsheetId(),
    };
  }
  return { id: id };
}

function whereToSetSpreadsheetId() {
  return 'このスタンドアロン プロジェクトの「プロジェクトの設定」（Project Settings）→「スクリプト プロパティ」（Script properties）で ' +
    TRIGGER.spreadsheetProperty + ' に sheetq のスプレッドシートの ID（URL の /d/ と /edit の間）を設定してから、もう一度実行してください';
}

/** The error of installSheetqTrigger when SHEETQ_SPREADSHEET_ID is not set. */
function missingSpreadsheetIdMessage() {
  return 'スクリプト プロパティ ' + TRIGGER.spreadsheetProperty + ' がありません。' + whereToSetSpreadsheetId();
}

/** The error of installSheetqTrigger when `me` cannot open spreadsheet `id` (Google said `said`). */
function cannotOpenMessage(id, me, said) {
  return 'スプレッドシート ' + id + '（' + TRIGGER.spreadsheetProperty + '）を ' + me + ' の権限で開けません: ' +
    String(said === undefined || said === null ? '' : said).slice(0, 300) + '。' + TRIGGER.spreadsheetProperty +
    ' の値と、' + me + ' がそのスプレッドシートのオーナー（または _ジョブキュー の保護範囲の編集者）であることを確かめてください';
}

/**
 * Why `me` must not install the standalone trigger on a spreadsheet whose queue is `queue`
 * (null when there is no `_ジョブキュー`; else { protections: [{ canEdit, warningOnly }] },
 * its protections as Protection.canEdit() and isWarningOnly() give them), or null. The
 * trigger writes as `me`, so `me` must be able to edit every protection of the queue; and a
 * queue without a real protection is the bound simple trigger's (takesPresses).
 */
function installQueueProblem(queue, me) {
  if (queue === null || queue === undefined) {
    return 'スプレッドシートに ' + QUEUE_SHEET + ' がありません。先に `sheetq init` を実行してください';
  }
  var real = queue.protections.filter(function (p) { return p.warningOnly !== true; });
  if (real.length === 0) {
    return QUEUE_SHEET + ' が保護されていません（警告のみの保護は保護ではありません）。保護されていないキューには編集者の誰もが' +
      '行を書けるので、このトリガーが書く依頼者は何の保証にもなりません。先に `sheetq init` でキューを保護してください';
  }
  if (queue.protections.some(function (p) { return p.canEdit !== true; })) {
    return me + ' は ' + QUEUE_SHEET + ' の保護範囲の編集者ではないので、このトリガーは押下を書き込めません。' +
      'スプレッドシートのオーナー（または保護範囲の編集者）がスタンドアロン プロジェクトを作り、installSheetqTrigger を実行してください';
  }
  return null;
}

/** Whether a project trigger ({ handler, eventType }) is the intake's installable onEdit. */
function isIntakeTrigger(t) {
  return String(t.handler) === TRIGGER.handler && String(t.eventType) === TRIGGER.eventType;
}

/**
 * What installSheetqTrigger does, run by `me`: `mine` the project's triggers that `me` owns
 * ({ handler, eventType, sourceId }; Apps Script shows no one another account's triggers),
 * `recorded` the owner the script property names ('' or null when none), `spreadsheetId` the
 * spreadsheet SHEETQ_SPREADSHEET_ID names (a standalone project serves one spreadsheet).
 * Returns
 *   { create: true, message }           no intake trigger yet: create one, record `me`;
 *   { create: false, message }          `me` has one already: keep it (and record `me`);
 *   { refuse: true, message }           another account has one: a second would queue
 *                                       every press twice; or `me`'s is another
 *                                       spreadsheet's.
 */
function installPlan(mine, recorded, me, spreadsheetId) {
  var owner = recorded === null || recorded === undefined ? '' : String(recorded).trim();
  var intake = mine.filter(isIntakeTrigger);
  var elsewhere = intake.filter(function (t) {
    return spreadsheetId !== undefined && t.sourceId !== undefined && String(t.sourceId) !== spreadsheetId;
  });
  if (elsewhere.length > 0) {
    return {
      refuse: true,
      message: 'このプロジェクトの sheetq の onEdit トリガーはスプレッドシート ' + elsewhere[0].sourceId +
        ' のものです。一つのプロジェクトは一つのスプレッドシートに使います。uninstallSheetqTrigger を実行してから、もう一度実行してください',
    };
  }
  if (intake.length > 0) {
    return { create: false, message: 'sheetq の onEdit トリガーは ' + me + ' のものが既にあります（' + TRIGGER.handler + '）。何もしません' };
  }
  if (owner !== '' && owner !== me) {
    return {
      refuse: true,
      message: 'sheetq の onEdit トリガーは既に ' + owner + ' が入れています。二つあると一回の押下が二度キューに入ります。' +
        owner + ' が uninstallSheetqTrigger を実行してから、もう一度実行してください' +
        '（' + owner + ' のトリガーがもう無いときは、プロジェクトの設定 → スクリプト プロパティで ' +
        TRIGGER.ownerProperty + ' を削除してください）',
    };
  }
  return {
    create: true,
    message: 'sheetq の onEdit トリガーを入れました。押下は ' + me + ' の権限でキューに書かれ、依頼者は押した人です（同じ Google Workspace ドメインの人のみ。他は空）',
  };
}

/**
 * What uninstallSheetqTrigger does besides deleting `me`'s intake triggers (`recorded` as
 * installPlan's): clear the property when it names `me` or no one; leave another owner's in
 * place. Returns { clear, message }.
 */
function uninstallPlan(recorded, me) {
  var owner = recorded === null || recorded === undefined ? '' : String(recorded).trim();
  var clear = owner === '' || owner === me;
  var message;
  if (clear) {
    message = 'sheetq の onEdit トリガーを外しました。保護されたキューへの押下は、トリガーを入れ直すまで受け付けられません';
  } else {
    message = 'sheetq の onEdit トリガーは ' + owner + ' のものです。' + owner + ' が uninstallSheetqTrigger を実行してください';
  }
  return { clear: clear, message: message };
}

/**
 * The toast of a press whose queue write Google refused because `_ジョブキュー` is protected
 * (its message: "You are trying to edit a protected cell or object. Please contact the
 * spreadsheet owner to remove protection if you need to edit.",
 * https://github.com/theoephraim/node-google-spreadsheet/pull/20), or null for any other
 * error. `runner`: the account the script ran as; `installable`: whether it ran as the
 * standalone project's installable trigger (whose owner must be an editor of the queue's
 * protection) rather than as the person who pressed (the bound simple trigger, which stands
 * down on a sheet-protected queue, so meets this only where a range protection covers part
 * of an otherwise open queue).
 */
function queueRefusedMessage(errorMessage, installable, runner) {
  if (!/protected cell or object/i.test(String(errorMessage))) return null;
  if (installable) {
    return '受け付けられませんでした: トリガーの所有者 ' + runner + ' は ' + QUEUE_SHEET +
      ' の保護範囲の編集者ではありません。' + runner + ' がスタンドアロン プロジェクトで uninstallSheetqTrigger を実行し、' +
      'スプレッドシートのオーナーが自分のスタンドアロン プロジェクトで installSheetqTrigger を実行してください';
  }
  return '受け付けられませんでした: ' + QUEUE_SHEET + ' は保護されていて、押した人の権限では書き込めません。' +
    'スプレッドシートのオーナーが sheetq のスタンドアロン Apps Script プロジェクトで installSheetqTrigger を一度実行してください';
}

/**
 * The システムフラグ a press takes from its panel row: all but `continuation`, which only sheetq
 * writes (on the row a command's `continue` appends). A panel's hidden cells are the sheet's,
 * and sheetq trusts a continuation's args on a protected queue, so a press never brings it,
 * nor anything that looks like it: each flag is trimmed by the sheet-text rule (sheetTrim),
 * and one whose skeleton is `continuation` (with U+0085, a no-break or zero-width space,
 * fullwidth letters, another case…) is dropped, as sheetq's press_flags drops it.
 */
function pressFlags(text) {
  return String(text).split(',').map(sheetTrim)
    .filter(function (f) { return f !== '' && skeleton(f) !== CONTINUATION_FLAG; }).join(',');
}

if (typeof module !== 'undefined') {
  module.exports = {
    pressStatus: pressStatus,
    RECEIVED_TEXT: RECEIVED_TEXT,
    NO_DAEMON_TEXT: NO_DAEMON_TEXT,
    NO_DAEMON_AFTER_MS: NO_DAEMON_AFTER_MS,
    daemonLiveness: daemonLiveness,
    indexStateText: indexStateText,
    INDEX_STATE_HEADER: INDEX_STATE_HEADER,
    sheetTrim: sheetTrim,
    sameSheetText: sameSheetText,
    skeleton: skeleton,
    compareSheetText: compareSheetText,
    isPlainSheetText: isPlainSheetText,
    CONTINUATION_FLAG: CONTINUATION_FLAG,
    pressFlags: pressFlags,
    QUEUE_SHEET: QUEUE_SHEET,
    HEADERS: HEADERS,
    OPTIONAL_HEADERS: OPTIONAL_HEADERS,
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
    AWAITING_APPROVAL: AWAITING_APPROVAL,
    isPending: isPending,
    serialOfWallClock: serialOfWallClock,
    queueColumns: queueColumns,
    queueRow: queueRow,
    duplicateOf: duplicateOf,
    duplicateMessage: duplicateMessage,
    receivedHHmm: receivedHHmm,
    resolveLabel: resolveLabel,
    noFunctionMessage: noFunctionMessage,
    queuedMessage: queuedMessage,
    noQueueMessage: noQueueMessage,
    cancelCells: cancelCells,
    isApprovalHeader: isApprovalHeader,
    cancelTargetOf: cancelTargetOf,
    cancelRequestText: cancelRequestText,
    cancelPlan: cancelPlan,
    cancelRequestedMessage: cancelRequestedMessage,
    cancelAskedMessage: cancelAskedMessage,
    nothingToCancelMessage: nothingToCancelMessage,
    noCancelColumnMessage: noCancelColumnMessage,
    approvalTargetOf: approvalTargetOf,
    approvalLines: approvalLines,
    approvalBy: approvalBy,
    approvalPlan: approvalPlan,
    approvedMessage: approvedMessage,
    selfApprovalMessage: selfApprovalMessage,
    alreadyApprovedMessage: alreadyApprovedMessage,
    nothingToApproveMessage: nothingToApproveMessage,
    noApprovalColumnMessage: noApprovalColumnMessage,
    unknownApproverMessage: unknownApproverMessage,
    requesterOf: requesterOf,
    INTAKE: INTAKE,
    takesPresses: takesPresses,
    openQueueStandDownMessage: openQueueStandDownMessage,
    TRIGGER: TRIGGER,
    ownerRecorded: ownerRecorded,
    sameAccount: sameAccount,
    legacyTriggerMessage: legacyTriggerMessage,
    spreadsheetIdOf: spreadsheetIdOf,
    missingSpreadsheetIdMessage: missingSpreadsheetIdMessage,
    cannotOpenMessage: cannotOpenMessage,
    installQueueProblem: installQueueProblem,
    isIntakeTrigger: isIntakeTrigger,
    installPlan: installPlan,
    uninstallPlan: uninstallPlan,
    queueRefusedMessage: queueRefusedMessage,
    pressInputs: pressInputs,
    inputResets: inputResets,
    movedRowMessage: movedRowMessage,
    argsWithInputs: argsWithInputs,
    missingInputMessage: missingInputMessage,
  };
}

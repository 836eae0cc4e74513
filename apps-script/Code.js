/**
 * The onEdit trigger of a panel spreadsheet: a ▶ tick on a PANEL_V2 panel becomes one
 * 待機 row of `_ジョブキュー`, which the sheetq daemon runs; a tick on the index (▶パネル)
 * becomes a panel job that creates or shows that target's panel. A simple trigger: it
 * needs no authorisation, runs as the person who ticked, and answers at once with a toast.
 *
 * The decisions live in intake.js (pure, tested with node --test); this file only reads
 * the sheets, takes the document lock and writes.
 */

function onEdit(e) {
  var range = e.range;
  if (range.getNumRows() !== 1 || range.getNumColumns() !== 1) return;
  if (range.getValue() !== true) return;
  var sheet = range.getSheet();
  var marker = String(sheet.getRange(PANEL.markerCell).getValue()).trim();
  var ss = e.source;
  var take;
  if (marker === PANEL.marker && range.getColumn() === PANEL.tickColumn &&
      range.getRow() >= PANEL.firstRow) {
    take = takeIn;
  } else if (marker === INDEX.marker && range.getColumn() === INDEX.tickColumn &&
      range.getRow() >= INDEX.firstRow) {
    take = takeInIndex;
  } else {
    return;
  }
  try {
    take(ss, sheet, range.getRow());
  } finally {
    // The tick is a button: it goes back whatever the outcome.
    range.setValue(false);
  }
}

/** A tick on the index: one panel job for that row's target, unless one is asked already. */
function takeInIndex(ss, sheet, row) {
  var label = String(sheet.getRange(row, INDEX.labelColumn).getValue()).trim();
  if (label === '') {
    ss.toast(noLabelMessage(row), 'sheetq');
    return;
  }
  var queue = ss.getSheetByName(QUEUE_SHEET);
  if (queue === null) {
    ss.toast(QUEUE_SHEET + ' がありません。`sheetq init` を実行してください', 'sheetq');
    return;
  }
  var tz = ss.getSpreadsheetTimeZone();
  var lock = LockService.getDocumentLock();
  lock.waitLock(10000);
  try {
    var data = queue.getDataRange().getValues();
    var header = data[0];
    if (panelAsked(header, data.slice(1), label)) {
      ss.toast(panelAskedMessage(label), 'sheetq');
      return;
    }
    var wall = Utilities.formatDate(new Date(), tz, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'");
    queue.appendRow(queueRow(header, indexPress({
      jobId: Utilities.getUuid(),
      wallMs: Date.parse(wall),
      requester: Session.getActiveUser().getEmail(),
      indexSheet: sheet.getName(),
      label: label,
    })));
  } finally {
    lock.releaseLock();
  }
  ss.toast(panelQueuedMessage(label), 'sheetq');
}

function takeIn(ss, sheet, row) {
  var tz = ss.getSpreadsheetTimeZone();
  var label = String(sheet.getRange(PANEL.labelCell).getValue()).trim();
  var panels = ss.getSheets().map(function (s) {
    var g = s.getRange(PANEL.markerCell + ':' + PANEL.labelCell).getValues();
    return { title: s.getName(), marker: g[0][0], label: g[1][0] };
  });
  var resolved = resolveLabel(panels, label);
  if (!resolved.ok) {
    ss.toast(resolved.message, 'sheetq');
    return;
  }
  var cells = sheet.getRange(row, 1, 1, PANEL.flagsColumn).getValues()[0];
  var fn = String(cells[PANEL.functionColumn - 1]).trim();
  if (fn === '') {
    ss.toast(noFunctionMessage(row), 'sheetq');
    return;
  }
  var queue = ss.getSheetByName(QUEUE_SHEET);
  if (queue === null) {
    ss.toast(QUEUE_SHEET + ' がありません。`sheetq init` を実行してください', 'sheetq');
    return;
  }
  // Two presses at once must not both pass the duplicate guard.
  var lock = LockService.getDocumentLock();
  lock.waitLock(10000);
  try {
    var data = queue.getDataRange().getValues();
    var header = data[0];
    var existing = duplicateOf(header, data.slice(1), label, fn);
    if (existing !== null) {
      ss.toast(duplicateMessage(header, existing, function (d) {
        return Utilities.formatDate(d, tz, 'HH:mm');
      }), 'sheetq');
      return;
    }
    // The wall clock of the spreadsheet's zone, as if it were UTC: what a date serial counts.
    var wall = Utilities.formatDate(new Date(), tz, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'");
    queue.appendRow(queueRow(header, {
      jobId: Utilities.getUuid(),
      wallMs: Date.parse(wall),
      requester: Session.getActiveUser().getEmail(),
      panelSheet: sheet.getName(),
      panelRow: row,
      target: label,
      fn: fn,
      command: String(cells[PANEL.commandColumn - 1]).trim(),
      argsJson: String(cells[PANEL.argsColumn - 1]),
      flags: String(cells[PANEL.flagsColumn - 1]).trim(),
    }));
  } finally {
    lock.releaseLock();
  }
  ss.toast(queuedMessage(fn, label), 'sheetq');
}

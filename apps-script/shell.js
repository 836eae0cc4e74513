/**
 * The imperative shell of the intake, shared by both kinds of project (intake.js, INTAKE):
 * the bound one's simple trigger (Code.js, `onEdit`) and the standalone one's installable
 * trigger (Trigger.js, `onSheetqEdit`). A ▶ tick on a PANEL_V2 panel becomes one 待機 row of
 * `_ジョブキュー`, which the sheetq daemon runs; a ■ tick asks the daemon to stop that
 * function's newest waiting or running job, by writing who and when into its 中止要求 cell; a
 * 承認 tick approves that function's newest job awaiting approval, by adding a line of who
 * and when to its 承認 cell; a tick on the index (▶パネル) becomes a panel job that creates or
 * shows that target's panel. Each tick is answered at once with a toast, and goes back to
 * unticked.
 *
 * Before it takes a tick, each kind looks at whether `_ジョブキュー` carries a protection
 * (queueProtected) and stands down when the queue is the other kind's
 * (intake.js, takesPresses): the standalone trigger serves a protected queue, the bound
 * simple trigger an open one. A kind that stands down touches nothing, the tick included,
 * which the other kind reads. Edits made by a script (the tick set back to FALSE here) run
 * no trigger (https://developers.google.com/apps-script/guides/triggers#restrictions).
 *
 * The decisions live in intake.js (pure, tested with node --test); this file only reads the
 * sheets, takes the lock (pressLock) and writes. It reaches the spreadsheet through the
 * event's `source` only, never SpreadsheetApp.getActive(), which a standalone project has
 * not ("Returns the currently active spreadsheet, or null if there is none",
 * https://developers.google.com/apps-script/reference/spreadsheet/spreadsheet-app#getActiveSpreadsheet()).
 */

/**
 * An edit, from either kind (`kind`, intake.js INTAKE): ticks of ■ boxes wherever it covers
 * them (a paste over a row covers one), else a tick of one cell, whose sheet and column
 * decide what it asks for: ▶ and index ticks are taken from an edit of that one cell only.
 * `press.installable`: whether this runs as the standalone trigger's owner rather than as
 * the person.
 */
function takePress(e, kind) {
  var range = e.range;
  var press = {
    ss: e.source, requester: requesterOf(e), kind: kind, installable: kind === INTAKE.standalone,
  };
  var boxes = cancelCells(range.getRow(), range.getColumn(), range.getNumRows(), range.getNumColumns());
  if (boxes !== null) {
    takeCancels(press, range.getSheet(), boxes);
  } else if (range.getNumRows() === 1 && range.getNumColumns() === 1) {
    takeTick(press, range);
  }
}

/**
 * A tick of one cell: a ▶ press or a 承認 tick on a panel, or a tick on the index. An
 * approval is taken from a tick of its own box only, never from a paste that carries a
 * ticked box along.
 */
function takeTick(press, range) {
  if (range.getValue() !== true) return;
  var sheet = range.getSheet();
  // The marker is the same text as PANEL_V2 or PANEL_INDEX (intake.js, sheetTrim), or the
  // sheet is no panel: `PANEL_V2` + U+0085 is not one here, as it is not one to sheetq.
  var marker = sheetTrim(sheet.getRange(PANEL.markerCell).getValue());
  var take;
  if (marker === PANEL.marker && range.getColumn() === PANEL.tickColumn &&
      range.getRow() >= PANEL.firstRow) {
    take = takeIn;
  } else if (marker === PANEL.marker && range.getRow() >= PANEL.firstRow &&
      isApproveColumn(sheet, range.getColumn())) {
    take = takeApproval;
  } else if (marker === INDEX.marker && range.getColumn() === INDEX.tickColumn &&
      range.getRow() >= INDEX.firstRow) {
    take = takeInIndex;
  } else {
    return;
  }
  if (standsDown(press)) return;
  try {
    take(press, sheet, range.getRow());
  } finally {
    // The tick is a button: it goes back whatever the outcome.
    range.setValue(false);
  }
}

/**
 * Whether `column` of a panel holds 承認 boxes: column K, and each column right of it whose
 * header says 承認 (one per approver: `panels sync` writes 承認, 承認 2, …).
 */
function isApproveColumn(sheet, column) {
  if (column === PANEL.approveColumn) return true;
  if (column < PANEL.approveColumn) return false;
  return isApprovalHeader(sheet.getRange(PANEL.headerRow, column).getValue());
}

/**
 * The ■ boxes an edit covers ({ first, count } rows of the ■ column): on a panel, each one
 * ticked asks to stop its row's job, in turn.
 */
function takeCancels(press, sheet, boxes) {
  var ticked = [];
  sheet.getRange(boxes.first, PANEL.cancelColumn, boxes.count, 1).getValues().forEach(function (v, i) {
    if (v[0] === true) ticked.push(boxes.first + i);
  });
  if (ticked.length === 0) return;
  if (!sameSheetText(sheet.getRange(PANEL.markerCell).getValue(), PANEL.marker)) return;
  if (standsDown(press)) return;
  try {
    ticked.forEach(function (row) { takeCancel(press, sheet, row); });
  } finally {
    // Buttons too: each goes back whatever the outcome.
    ticked.forEach(function (row) { sheet.getRange(row, PANEL.cancelColumn).setValue(false); });
  }
}

/**
 * A ■ tick on a panel row: who ticked and when, written into the 中止要求 of that function's
 * newest waiting, awaiting or running job, unless someone asked already (intake.js,
 * cancelPlan). The daemon then never starts the job, or stops it; an approver's request on
 * a job awaiting approval rejects it.
 */
function takeCancel(press, sheet, row) {
  // Two ticks at once must not both find the 中止要求 empty.
  writeJobCell(press, sheet, row, function (header, rows, label, fn, time, wallMsOf) {
    var plan = cancelPlan(header, rows, label, fn, wallMsOf);
    if (plan.index !== undefined) plan.text = cancelRequestText(press.requester, time, plan.jobId);
    return plan;
  });
}

/**
 * A 承認 tick on a panel row: who ticked and when, added as a line to the 承認 of that
 * function's newest job awaiting approval, unless it could never count: Google did not say
 * who ticked, the one ticking asked for the job, or their approval of it is there already
 * (intake.js, approvalPlan). The daemon counts the lines of the function's approvers and
 * runs the job once there are enough.
 */
function takeApproval(press, sheet, row) {
  // Two approvals at once must each add their line to what the other wrote, not replace it.
  writeJobCell(press, sheet, row, function (header, rows, label, fn, time, wallMsOf) {
    return approvalPlan(header, rows, label, fn, press.requester, time, wallMsOf);
  });
}

/**
 * Writes one cell of a panel row's job under the press lock (pressLock), as `planOf(header, rows,
 * label, fn, time, wallMsOf)` plans it from a fresh read of the queue: `{index, column,
 * jobId, text, message}`, or `{message}` alone when nothing is to be written; then toasts
 * the message. People sort and move queue rows at any moment: a row number holds only for
 * the read that found it. The text names its job, so one that a sort put on another row
 * between the read and the write does nothing there (sheetq honours it only on its job's
 * row); the write is checked by reading that row's jobId back, and planned afresh once if
 * it missed.
 */
function writeJobCell(press, sheet, row, planOf) {
  var ss = press.ss;
  // Trimmed of spaces and tabs only (intake.js, sheetTrim), as sheetq reads the queue's
  // 対象ラベル and 機能ラベル: a label that differs by another character is another job's.
  var label = sheetTrim(sheet.getRange(PANEL.labelCell).getValue());
  var fn = sheetTrim(sheet.getRange(row, PANEL.functionColumn).getValue());
  if (fn === '') {
    ss.toast(noFunctionMessage(row), 'sheetq');
    return;
  }
  var queue = ss.getSheetByName(QUEUE_SHEET);
  if (queue === null) {
    ss.toast(noQueueMessage(), 'sheetq');
    return;
  }
  var tz = ss.getSpreadsheetTimeZone();
  var time = Utilities.formatDate(new Date(), tz, 'yyyy/MM/dd HH:mm:ss');
  var lock = pressLock();
  lock.waitLock(10000);
  var plan;
  try {
    for (var attempt = 0; attempt < 2; attempt++) {
      var data = queue.getDataRange().getValues();
      plan = planOf(data[0], data.slice(1), label, fn, time, function (d) { return wallClockOf(d, tz); });
      if (plan.index === undefined) break;
      var cols = queueColumns(data[0]).index;
      var cell = queue.getRange(plan.index + 2, plan.column + 1);
      if (!writeQueue(press, function () { cell.setValue(plan.text); })) return;
      if (String(queue.getRange(plan.index + 2, cols.jobId + 1).getValue()) === plan.jobId) break;
    }
  } finally {
    lock.releaseLock();
  }
  ss.toast(plan.message, 'sheetq');
}

/** The wall clock of `date` in zone `tz`, in milliseconds as if it were UTC: what a date serial counts. */
function wallClockOf(date, tz) {
  return Date.parse(Utilities.formatDate(date, tz, "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"));
}

/** Appends `row` to the queue; false, after a toast, when the queue refuses it (writeQueue). */
function appendToQueue(press, queue, row) {
  return writeQueue(press, function () { queue.appendRow(row); });
}

/**
 * Runs `write`, a write of the queue; false, with a toast that says why and what to do,
 * when Google refuses it because the queue is protected (the simple trigger, run as the
 * person, on a queue `sheetq init` protected). Any other failure is thrown.
 */
function writeQueue(press, write) {
  try {
    write();
    return true;
  } catch (err) {
    var runner = press.installable ? Session.getEffectiveUser().getEmail() : '';
    var message = queueRefusedMessage(err && err.message, press.installable, runner);
    if (message === null) throw err;
    press.ss.toast(message, 'sheetq');
    return false;
  }
}

/** A tick on the index: one panel job for that row's target, unless one is asked already. */
function takeInIndex(press, sheet, row) {
  var ss = press.ss;
  var label = sheetTrim(sheet.getRange(row, INDEX.labelColumn).getValue());
  if (label === '') {
    ss.toast(noLabelMessage(row), 'sheetq');
    return;
  }
  var queue = ss.getSheetByName(QUEUE_SHEET);
  if (queue === null) {
    ss.toast(noQueueMessage(), 'sheetq');
    return;
  }
  var tz = ss.getSpreadsheetTimeZone();
  var lock = pressLock();
  lock.waitLock(10000);
  try {
    var data = queue.getDataRange().getValues();
    var header = data[0];
    if (panelAsked(header, data.slice(1), label)) {
      ss.toast(panelAskedMessage(label), 'sheetq');
      return;
    }
    var queued = appendToQueue(press, queue, queueRow(header, indexPress({
      jobId: Utilities.getUuid(),
      wallMs: wallClockOf(new Date(), tz),
      requester: press.requester,
      indexSheet: sheet.getName(),
      label: label,
    })));
  } finally {
    lock.releaseLock();
  }
  if (queued) ss.toast(panelQueuedMessage(label), 'sheetq');
}

/** A ▶ tick on a panel: one 待機 row for that row's function, unless one is waiting already. */
function takeIn(press, sheet, row) {
  var ss = press.ss;
  var tz = ss.getSpreadsheetTimeZone();
  // The press carries the panel's text trimmed of spaces and tabs only (intake.js,
  // sheetTrim), never normalised: sheetq then tells a label, function or command that only
  // looks like a configured one (U+FEFF, U+3000, fullwidth…) and refuses it, where a wider
  // trim here would have made it the configured one.
  var label = sheetTrim(sheet.getRange(PANEL.labelCell).getValue());
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
  var fn = sheetTrim(cells[PANEL.functionColumn - 1]);
  if (fn === '') {
    ss.toast(noFunctionMessage(row), 'sheetq');
    return;
  }
  var queue = ss.getSheetByName(QUEUE_SHEET);
  if (queue === null) {
    ss.toast(noQueueMessage(), 'sheetq');
    return;
  }
  // Two presses at once must not both pass the duplicate guard.
  var lock = pressLock();
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
    // The inputs as they are now, under the lock that queues the press: a change after it
    // never reaches the job.
    var panelWidth = Math.max(sheet.getLastColumn(), PANEL.flagsColumn);
    var rowCells = sheet.getRange(row, 1, 1, panelWidth).getValues()[0];
    if (sheetTrim(rowCells[PANEL.functionColumn - 1]) !== fn) {
      // A sort moved another function onto the row since the press was read: its inputs
      // are not this press's.
      ss.toast(movedRowMessage(fn), 'sheetq');
      return;
    }
    var spec = rowCells[PANEL.inputsColumn - 1];
    var taken = pressInputs(rowCells, spec, function (d) {
      return Utilities.formatDate(d, tz, 'yyyy-MM-dd');
    });
    if (!taken.ok) {
      ss.toast(taken.message, 'sheetq');
      return;
    }
    var status = pressStatus(header, data.slice(1), label);
    var alive = daemonsAlive(ss);
    if (alive === false) status = NO_DAEMON_TEXT;
    var newRow = queueRow(header, {
      jobId: Utilities.getUuid(),
      wallMs: wallClockOf(new Date(), tz),
      requester: press.requester,
      panelSheet: sheet.getName(),
      panelRow: row,
      target: label,
      fn: fn,
      command: sheetTrim(cells[PANEL.commandColumn - 1]),
      argsJson: argsWithInputs(String(cells[PANEL.argsColumn - 1]), taken.inputs),
      inputs: taken.text,
      flags: pressFlags(cells[PANEL.flagsColumn - 1]),
    });
    var queued = appendToQueue(press, queue, newRow);
    if (queued) {
      // The press is answered at once, under the lock that queued it: what it waits for.
      // A cell the one pressing may not edit (the bound project runs as them) is left to
      // the daemon, which writes the same text at its next write.
      try {
        sheet.getRange(row, PANEL.statusColumn).setValue(status);
      } catch (err) {
        console.log('sheetq: the press was queued; its 状態 cell could not be written: ' + (err && err.message));
      }
      // reset_inputs: the input cells return to their defaults (the spec's third items).
      inputResets(spec).forEach(function (reset) {
        try {
          sheet.getRange(row, reset.column).setValue(reset.value);
        } catch (err) {
          console.log('sheetq: the press was queued; an input cell could not be reset: ' + (err && err.message));
        }
      });
      // The index agrees at once: its 状況 for the target, as the daemon words it.
      try {
        writeIndexState(ss, label, indexStateText(header, data.slice(1).concat([newRow]), label, alive));
      } catch (err) {
        console.log('sheetq: the press was queued; the index\'s 状況 could not be written: ' + (err && err.message));
      }
    }
  } finally {
    lock.releaseLock();
  }
  if (queued) ss.toast(queuedMessage(fn, label), 'sheetq');
}

/**
 * Writes `text` to the 状況 cell of `label`'s row of the index (the sheet marked PANEL_INDEX
 * in G1; 状況 found by its header, the row by the label in column B). Nothing when there is
 * no index or no such row.
 */
function writeIndexState(ss, label, text) {
  var index = ss.getSheets().filter(function (s) {
    return String(s.getRange(INDEX.markerCell).getValue()) === INDEX.marker;
  })[0];
  if (index === undefined) return;
  var header = index.getRange(1, 1, 1, index.getLastColumn()).getValues()[0];
  var column = header.map(function (h) { return sheetTrim(h); }).indexOf(INDEX_STATE_HEADER);
  var last = index.getLastRow();
  if (column < 0 || last < INDEX.firstRow) return;
  var labels = index.getRange(INDEX.firstRow, INDEX.labelColumn, last - INDEX.firstRow + 1, 1).getValues();
  for (var i = 0; i < labels.length; i++) {
    if (sameSheetText(labels[i][0], label)) {
      index.getRange(INDEX.firstRow + i, column + 1).setValue(text);
      return;
    }
  }
}

/**
 * Whether a sheetq daemon is alive, as the heartbeat rows of `_ワーカー` have changed or not
 * on this script's clock (intake.js, daemonLiveness): true, false, or null when it cannot be
 * told. What each run saw is kept in a script property for the next; it only chooses the
 * words of a press's 状態, never whether the press is queued.
 */
function daemonsAlive(ss) {
  var workers = ss.getSheetByName('_ワーカー');
  if (workers === null) return null;
  var last = workers.getLastRow();
  var rows = last >= HEARTBEAT_FIRST_ROW
    ? workers.getRange(HEARTBEAT_FIRST_ROW, 1, last - HEARTBEAT_FIRST_ROW + 1, 6).getValues()
    : [];
  // Script properties are readable in a simple trigger (AuthMode.LIMITED,
  // https://developers.google.com/apps-script/reference/script/auth-mode); should a call
  // fail all the same, the press is answered as if nothing were known.
  try {
    var props = PropertiesService.getScriptProperties();
    var seen = null;
    try {
      seen = JSON.parse(props.getProperty(HEARTBEAT_PROPERTY) || 'null');
    } catch (err) {
      seen = null;
    }
    var judged = daemonLiveness(seen, JSON.stringify(rows), Date.now());
    props.setProperty(HEARTBEAT_PROPERTY, JSON.stringify(judged.seen));
    return judged.alive;
  } catch (err) {
    console.log('sheetq: cannot keep what the heartbeats showed: ' + (err && err.message));
    return null;
  }
}

/**
 * Whether this kind leaves the press to the other (intake.js, takesPresses), by the queue's
 * protection now. Called once a tick is known to be one, so that an edit of any other
 * cell costs no read.
 */
function standsDown(press) {
  if (takesPresses(press.kind, queueProtected(press.ss))) return false;
  if (press.installable) console.log(openQueueStandDownMessage());
  return true;
}

/**
 * Whether `_ジョブキュー` carries a protection, of any kind (warning-only included) and either
 * type: Sheet.getProtections lists a sheet's protections of one type, whoever may edit them
 * (https://developers.google.com/apps-script/reference/spreadsheet/sheet#getProtections(ProtectionType),
 * https://developers.google.com/apps-script/reference/spreadsheet/protection-type). Both
 * types, because `sheetq init` protects the queue through the Sheets API with a range from
 * its first row and column with no end, which Google documents neither as a "protected
 * sheet" (a fully unbounded range) nor otherwise; either way both kinds of project read the
 * same answer, which is all takesPresses needs. A simple trigger may call it: it reads the
 * file its script is bound to, which a simple trigger may read and modify without
 * authorisation (https://developers.google.com/apps-script/guides/triggers#restrictions).
 */
function queueProtected(ss) {
  var queue = ss.getSheetByName(QUEUE_SHEET);
  if (queue === null) return false;
  return queue.getProtections(SpreadsheetApp.ProtectionType.SHEET).length > 0 ||
    queue.getProtections(SpreadsheetApp.ProtectionType.RANGE).length > 0;
}

/**
 * The lock under which a press reads and writes the queue, so that two presses never both
 * pass the duplicate guard or both find a 中止要求 empty: the document lock in the bound
 * project; in the standalone project, which has none ("If this method is called outside of
 * the context of a containing document (such as from a standalone script or web app), null
 * is returned", https://developers.google.com/apps-script/reference/lock/lock-service#getDocumentLock()),
 * the script lock, which no two executions of the project hold at once whoever runs them
 * (https://developers.google.com/apps-script/reference/lock/lock-service#getScriptLock()).
 * A standalone project serves one spreadsheet (Trigger.js), so its script lock is that
 * spreadsheet's. The two kinds never take a press of one queue both (takesPresses), so they
 * need no lock in common.
 */
function pressLock() {
  var lock = LockService.getDocumentLock();
  return lock !== null ? lock : LockService.getScriptLock();
}

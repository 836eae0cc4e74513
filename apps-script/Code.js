/**
 * The edit triggers of a panel spreadsheet: a ▶ tick on a PANEL_V2 panel becomes one 待機
 * row of `_ジョブキュー`, which the sheetq daemon runs; a ■ tick asks the daemon to stop that
 * function's newest waiting or running job, by writing who and when into its 中止要求 cell; a
 * 承認 tick approves that function's newest job awaiting approval, by adding a line of who
 * and when to its 承認 cell; a tick on the index (▶パネル) becomes a panel job that creates or
 * shows that target's panel. Each tick is answered at once with a toast, and goes back to
 * unticked.
 *
 * Two ways to take presses (README.md, "The Apps Script intake", says what each gives):
 *
 * - The simple trigger `onEdit`: nothing to install or authorise. Apps Script runs it as
 *   the person who edited, with no authorisation of its own; it may change this spreadsheet
 *   only as that person may (https://developers.google.com/apps-script/guides/triggers#restrictions).
 *   Once `_ジョブキュー` is protected for sheetq's service account, Google refuses the row
 *   (and a ■ or 承認 tick's cell: "You are trying to edit a protected cell or object…") and
 *   the person is told so in a toast; nothing is queued or written. It serves only an open
 *   queue, which every editor can also write by hand, 依頼者 and 承認 included.
 * - The installable trigger: the spreadsheet's owner (or an account that is an editor of
 *   the protected ranges) runs installSheetqTrigger() once from the script editor. Edits
 *   then also run onSheetqEdit, as that account: "Installable triggers always run under the
 *   account of the person who created them"
 *   (https://developers.google.com/apps-script/guides/triggers/installable#restrictions).
 *   It writes the protected queue, and takes 依頼者 from the event's `user`, which Google
 *   fills for people of the owner's Google Workspace domain and leaves blank for others
 *   (intake.js, requesterOf). Never from Session.getActiveUser(): the script runs as the
 *   trigger's owner (Session.getEffectiveUser(),
 *   https://developers.google.com/apps-script/reference/base/session#getEffectiveUser()),
 *   and a blank 依頼者 is honest where a guess is not.
 *
 * Both kinds fire on every edit. So that one press is never queued twice, the install
 * records the trigger's owner in the script property SHEETQ_TRIGGER_OWNER (intake.js,
 * TRIGGER), which a simple trigger may read, and `onEdit` does nothing while it is set.
 * uninstallSheetqTrigger() removes the trigger and the property, and the simple trigger
 * takes presses again. A trigger made by hand in the Triggers page is not recorded: use
 * the functions. Edits made by a script (the tick set back to FALSE here) run no trigger
 * (https://developers.google.com/apps-script/guides/triggers#restrictions).
 *
 * The decisions live in intake.js (pure, tested with node --test); this file only reads
 * the sheets, takes the document lock and writes.
 */

/** The simple trigger, run as the person who edited: stands down once the installable one is in. */
function onEdit(e) {
  var owner = PropertiesService.getScriptProperties().getProperty(TRIGGER.ownerProperty);
  if (simpleStandsDown(owner)) return;
  takePress(e, false);
}

/** The installable trigger's handler (installSheetqTrigger), run as the trigger's owner. */
function onSheetqEdit(e) {
  takePress(e, true);
}

/**
 * Run once from the script editor by the spreadsheet's owner (or an editor of the protected
 * ranges): installs the installable onEdit trigger owned by whoever runs it, unless that
 * account has one already; refuses (throws, naming the owner) when another account has.
 */
function installSheetqTrigger() {
  var me = Session.getEffectiveUser().getEmail();
  var props = PropertiesService.getScriptProperties();
  var plan = installPlan(projectTriggers(), props.getProperty(TRIGGER.ownerProperty), me);
  if (plan.refuse) throw new Error(plan.message);
  if (plan.create) {
    ScriptApp.newTrigger(TRIGGER.handler).forSpreadsheet(SpreadsheetApp.getActive()).onEdit().create();
  }
  props.setProperty(TRIGGER.ownerProperty, me);
  console.log(plan.message);
}

/** Removes the caller's installable trigger, and hands presses back to the simple `onEdit`. */
function uninstallSheetqTrigger() {
  var me = Session.getEffectiveUser().getEmail();
  var props = PropertiesService.getScriptProperties();
  var plan = uninstallPlan(props.getProperty(TRIGGER.ownerProperty), me);
  ScriptApp.getProjectTriggers().forEach(function (t) {
    if (isIntakeTrigger({ handler: t.getHandlerFunction(), eventType: t.getEventType() })) {
      ScriptApp.deleteTrigger(t);
    }
  });
  if (plan.clear) props.deleteProperty(TRIGGER.ownerProperty);
  console.log(plan.message);
}

/** The project's triggers the running account owns, as { handler, eventType }. */
function projectTriggers() {
  return ScriptApp.getProjectTriggers().map(function (t) {
    return { handler: t.getHandlerFunction(), eventType: t.getEventType() };
  });
}

/**
 * An edit, from either trigger: ticks of ■ boxes wherever it covers them (a paste over a row
 * covers one), else a tick of one cell, whose sheet and column decide what it asks for: ▶ and
 * index ticks are taken from an edit of that one cell only. `installable`: whether this runs
 * as the installable trigger's owner rather than as the person.
 */
function takePress(e, installable) {
  var range = e.range;
  var press = { ss: e.source, requester: requesterOf(e), installable: installable };
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
  } else if (marker === PANEL.marker && range.getColumn() === PANEL.approveColumn &&
      range.getRow() >= PANEL.firstRow) {
    take = takeApproval;
  } else if (marker === INDEX.marker && range.getColumn() === INDEX.tickColumn &&
      range.getRow() >= INDEX.firstRow) {
    take = takeInIndex;
  } else {
    return;
  }
  try {
    take(press, sheet, range.getRow());
  } finally {
    // The tick is a button: it goes back whatever the outcome.
    range.setValue(false);
  }
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
 * Writes one cell of a panel row's job under the document lock, as `planOf(header, rows,
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
  var lock = LockService.getDocumentLock();
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
  var lock = LockService.getDocumentLock();
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
    var queued = appendToQueue(press, queue, queueRow(header, {
      jobId: Utilities.getUuid(),
      wallMs: wallClockOf(new Date(), tz),
      requester: press.requester,
      panelSheet: sheet.getName(),
      panelRow: row,
      target: label,
      fn: fn,
      command: sheetTrim(cells[PANEL.commandColumn - 1]),
      argsJson: String(cells[PANEL.argsColumn - 1]),
      flags: pressFlags(cells[PANEL.flagsColumn - 1]),
    }));
  } finally {
    lock.releaseLock();
  }
  if (queued) ss.toast(queuedMessage(fn, label), 'sheetq');
}

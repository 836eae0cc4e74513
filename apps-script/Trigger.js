/**
 * The standalone project's entry (a project of its own at script.google.com or
 * `clasp create --type standalone`; its files are intake.js, shell.js and this one): the
 * trusted intake of a protected `_ジョブキュー`.
 *
 * A standalone project is not shared with the spreadsheet's editors
 * (https://developers.google.com/apps-script/guides/projects#create_a_standalone_project):
 * only its owner edits this code. Its owner is the spreadsheet's owner (or an account the
 * owner makes an editor of the queue's protection); they set the script property
 * SHEETQ_SPREADSHEET_ID (Project Settings → Script properties) and run installSheetqTrigger
 * once from this project's editor. That installs an installable edit trigger for that
 * spreadsheet (ScriptApp.newTrigger(…).forSpreadsheet(id).onEdit(),
 * https://developers.google.com/apps-script/reference/script/spreadsheet-trigger-builder),
 * which runs onSheetqEdit as them: "Installable triggers always run under the account of the
 * person who created them"
 * (https://developers.google.com/apps-script/guides/triggers/installable#restrictions). It
 * writes the protected queue, and takes 依頼者 from the event's `user`, which Google fills for
 * people of the owner's Google Workspace domain and leaves blank for others (intake.js,
 * requesterOf). Never from Session.getActiveUser(): the script runs as the trigger's owner
 * (Session.getEffectiveUser(),
 * https://developers.google.com/apps-script/reference/base/session#getEffectiveUser()), and
 * a blank 依頼者 is honest where a guess is not.
 *
 * One project serves one spreadsheet: all its presses run in this project, under its script
 * lock (shell.js, pressLock; a standalone project has no document lock). The install records
 * the trigger's owner in the script property SHEETQ_TRIGGER_OWNER and refuses a second
 * account's (two triggers would queue every press twice; intake.js, installPlan);
 * uninstallSheetqTrigger removes both. A trigger made by hand in the Triggers page is not
 * recorded: use the functions.
 *
 * It takes presses only while the queue is protected; an open queue is the bound project's
 * simple trigger's (shell.js, standsDown; intake.js, takesPresses), so the two never queue one
 * press twice.
 */

/** The installable trigger's handler (installSheetqTrigger), run as the trigger's owner. */
function onSheetqEdit(e) {
  takePress(e, INTAKE.standalone);
}

/**
 * Run once from this project's editor by the spreadsheet's owner (or an editor of the queue's
 * protection): opens the spreadsheet SHEETQ_SPREADSHEET_ID names, checks that its queue is
 * protected and that the running account may write it, then installs the edit trigger for
 * it, owned by whoever runs this, unless that account has one already. Throws, saying what to
 * do, when the property is missing, the spreadsheet cannot be opened, the queue is not
 * protected or not the running account's to write, or another account has the trigger.
 */
function installSheetqTrigger() {
  var me = Session.getEffectiveUser().getEmail();
  var props = PropertiesService.getScriptProperties();
  var ss = sheetqSpreadsheet(props, me);
  var problem = installQueueProblem(queueProtectionsOf(ss), me);
  if (problem !== null) throw new Error(problem);
  var plan = installPlan(projectTriggers(), props.getProperty(TRIGGER.ownerProperty), me, ss.getId());
  if (plan.refuse) throw new Error(plan.message);
  if (plan.create) {
    ScriptApp.newTrigger(TRIGGER.handler).forSpreadsheet(ss.getId()).onEdit().create();
  }
  props.setProperty(TRIGGER.ownerProperty, me);
  console.log(plan.message);
}

/** Removes the caller's installable trigger, and the record of it when it is theirs. */
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

/**
 * The spreadsheet SHEETQ_SPREADSHEET_ID names, opened as `me`
 * (https://developers.google.com/apps-script/reference/spreadsheet/spreadsheet-app#openById(String));
 * throws, naming the property and where to set it, when it is missing or cannot be opened.
 */
function sheetqSpreadsheet(props, me) {
  var named = spreadsheetIdOf(props.getProperty(TRIGGER.spreadsheetProperty));
  if (named.problem !== undefined) throw new Error(named.problem);
  try {
    return SpreadsheetApp.openById(named.id);
  } catch (err) {
    throw new Error(cannotOpenMessage(named.id, me, err && err.message));
  }
}

/**
 * The queue's protections, of both types (shell.js, queueProtected, says why), as intake.js
 * installQueueProblem takes them, or null when the spreadsheet has no `_ジョブキュー`.
 * Protection.canEdit(): "Determines whether the user has permission to edit the protected
 * range or sheet. The owner of the spreadsheet is always able to edit protected ranges and
 * sheets." (https://developers.google.com/apps-script/reference/spreadsheet/protection#canEdit()).
 * Whether the protection is the one sheetq makes is `sheetq check`'s to say.
 */
function queueProtectionsOf(ss) {
  var queue = ss.getSheetByName(QUEUE_SHEET);
  if (queue === null) return null;
  var types = [SpreadsheetApp.ProtectionType.SHEET, SpreadsheetApp.ProtectionType.RANGE];
  return {
    protections: types.reduce(function (all, type) {
      return all.concat(queue.getProtections(type).map(function (p) {
        return { canEdit: p.canEdit(), warningOnly: p.isWarningOnly() };
      }));
    }, []),
  };
}

/** The project's triggers the running account owns, as { handler, eventType, sourceId }. */
function projectTriggers() {
  return ScriptApp.getProjectTriggers().map(function (t) {
    return { handler: t.getHandlerFunction(), eventType: t.getEventType(), sourceId: t.getTriggerSourceId() };
  });
}

/**
 * The bound project's entry (Extensions → Apps Script of the spreadsheet; its files are
 * intake.js, shell.js and this one): the simple trigger `onEdit`, and nothing else.
 *
 * Untrusted, by construction. Google shares a bound project with every editor of its
 * spreadsheet, so any editor can rewrite this file. The simple trigger runs as the person
 * who edited, with no authorisation of its own, and may change the spreadsheet only as that
 * person may (https://developers.google.com/apps-script/guides/triggers#restrictions): what
 * it writes, that person could have typed. Its 依頼者 is advisory and grants nothing.
 *
 * It serves only an open queue. Once `sheetq init` has protected `_ジョブキュー`, presses are
 * the standalone project's (Trigger.js: an installable trigger the spreadsheet's owner
 * installs from a project no editor can see, which writes as that owner), and `onEdit` stands
 * down (shell.js, standsDown; intake.js, takesPresses): for a person other than the owner
 * Google would refuse the write anyway, and for the owner it would be a second row beside
 * the standalone trigger's. A tick it stands down from is left as it is, for the standalone
 * trigger to read and clear; with no standalone trigger installed the ▶ stays ticked, with no
 * toast.
 *
 * What no code here can close: a simple trigger runs as whoever edits, the owner included,
 * and an editor can put any `onEdit` into this project; it then acts with the owner's rights
 * over the spreadsheet whenever the owner edits a cell (README.md, "The Apps Script intake").
 *
 * There is no installSheetqTrigger or onSheetqEdit here any more. An installable trigger
 * made in this project by an earlier version (handler onSheetqEdit, run as the account that
 * installed it, "Installable triggers always run under the account of the person who created
 * them", https://developers.google.com/apps-script/guides/triggers/installable#restrictions)
 * finds no handler and does nothing; but it would run as that account any onSheetqEdit an
 * editor wrote here, so it must go. The earlier install recorded its owner in the script
 * property SHEETQ_TRIGGER_OWNER; while that property is set, `onEdit` logs how to remove the
 * trigger and, when the person who edited is that owner, shows it to them (intake.js,
 * legacyTriggerMessage). The removal is done in the Triggers page and Project Settings, never
 * by running a function of this project: a bound function run by the owner runs whatever an
 * editor put here.
 */

/** The simple trigger, run as the person who edited: takes presses of an open queue only. */
function onEdit(e) {
  warnOfLegacyTrigger(e);
  takePress(e, INTAKE.bound);
}

/**
 * While the bound project still records an earlier version's installable trigger
 * (SHEETQ_TRIGGER_OWNER, which a simple trigger may read: AuthMode.LIMITED,
 * https://developers.google.com/apps-script/reference/script/auth-mode), logs how to remove
 * it (Executions, seen by the project's editors) and tells its owner in a toast when it is
 * them who edited (the event's `user`, which names the script's owner to the script,
 * https://developers.google.com/apps-script/reference/base/user#getEmail()).
 */
function warnOfLegacyTrigger(e) {
  var owner = PropertiesService.getScriptProperties().getProperty(TRIGGER.ownerProperty);
  if (!ownerRecorded(owner)) return;
  var message = legacyTriggerMessage(owner);
  console.warn(message);
  if (sameAccount(requesterOf(e), owner)) e.source.toast(message, 'sheetq', 30);
}

// node --test apps-script/: the pure intake functions of the Apps Script trigger.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const fs = require('node:fs');
const path = require('node:path');
const intake = require('./intake.js');
const fixture = require('./fixtures/press.json');
const { wallClockMs } = require('./runtime/gas.js');

function pressOf(f) {
  return { ...f.press, wallMs: wallClockMs(Date.parse(f.press.receivedAt), f.timeZone) };
}

test('a press becomes the very row sheetq writes for it (shared fixture)', () => {
  assert.deepEqual(intake.queueRow(fixture.header, pressOf(fixture)), fixture.row);
});

test('columns are found by name, in any order, and the row is as wide as the known ones', () => {
  const header = [...fixture.header].reverse().concat(['メモ']);
  const row = intake.queueRow(header, pressOf(fixture));
  assert.equal(row.length, 16, 'a column sheetq does not know is left out, as sheetq does');
  assert.equal(row[header.indexOf('jobId')], fixture.press.jobId);
  assert.equal(row[header.indexOf('状態')], '待機');
  assert.equal(row[header.indexOf('開始日時')], '');
});

const layouts = require('./fixtures/queue-layouts.json').layouts;

for (const [name, header] of Object.entries(layouts)) {
  test(`layout ${name}: a press's row puts every value under its own header, and the guard finds it`, () => {
    const row = intake.queueRow(header, pressOf(fixture));
    const known = fixture.header;
    assert.equal(row.length, Math.max(...known.map((h) => header.indexOf(h))) + 1,
      'as wide as the right-most known column');
    header.slice(0, row.length).forEach((h, i) => {
      const k = known.indexOf(h);
      assert.deepEqual(row[i], k < 0 ? '' : fixture.row[k],
        k < 0 ? `people's column ${h} is left empty` : `${h} holds the press's value`);
    });
    const p = fixture.press;
    assert.equal(intake.duplicateOf(header, [row], p.target, p.fn), row,
      'the duplicate guard reads the row by the same header');
    assert.equal(intake.duplicateMessage(header, row, () => assert.fail('a serial')),
      '既に実行中です（依頼: 不明 / 14:04）');
  });
}

test('a name repeated among people\'s columns is fine; a repeated queue header is not', () => {
  const header = ['メモ', ...fixture.header, 'メモ'];
  assert.equal(intake.queueRow(header, pressOf(fixture))[1], fixture.press.jobId);
  assert.throws(() => intake.queueRow([...fixture.header, 'jobId'], pressOf(fixture)), /"jobId" appears twice/);
});

test('an empty requester is written as empty text', () => {
  const row = intake.queueRow(fixture.header, { ...pressOf(fixture), requester: undefined });
  assert.equal(row[2], '');
  const named = intake.queueRow(fixture.header, { ...pressOf(fixture), requester: 'a@example.com' });
  assert.equal(named[2], 'a@example.com');
});

test('a header that is not a queue header is refused, naming what is missing', () => {
  assert.throws(() => intake.queueRow(['jobId', '状態'], pressOf(fixture)), /lacks the columns 受付日時/);
  assert.throws(
    () => intake.queueRow(fixture.header.concat(['状態']), pressOf(fixture)),
    /"状態" appears twice/,
  );
});

test('the date serial counts days since 1899-12-30 on the sheet clock', () => {
  assert.equal(intake.serialOfWallClock(Date.UTC(1899, 11, 31)), 1);
  assert.equal(intake.serialOfWallClock(Date.UTC(2026, 10, 30, 12)), 46356.5);
});

function queue(rows) {
  return rows.map(([state, target, fn, requester, received, panelSheet]) => {
    const r = new Array(16).fill('');
    r[1] = received ?? '';
    r[2] = requester ?? '';
    r[3] = panelSheet ?? '';
    r[5] = target;
    r[6] = fn;
    r[10] = state;
    return r;
  });
}

test('the duplicate guard finds a waiting or running row of the same target and function', () => {
  const rows = queue([
    ['完了', 'A', 'f'],
    ['実行中', 'A', 'g'],
    ['待機', 'B', 'f'],
  ]);
  assert.equal(intake.duplicateOf(fixture.header, rows, 'A', 'f'), null, 'a finished row is no duplicate');
  assert.equal(intake.duplicateOf(fixture.header, rows, ' A ', 'g '), rows[1], 'compared trimmed');
  assert.equal(intake.duplicateOf(fixture.header, rows, 'B', 'f'), rows[2]);
  const byPanel = queue([['待機', '', 'f', '', '', 'C']]);
  assert.equal(intake.duplicateOf(fixture.header, byPanel, 'C', 'f'), byPanel[0], 'an empty target falls back to the panel sheet');
});

test('the duplicate toast names who asked and when, or says it is unknown', () => {
  const noon = intake.serialOfWallClock(Date.UTC(2026, 10, 30, 12, 3));
  const [asked, anonymous, dated] = queue([
    ['待機', 'A', 'f', 'y@example.com', noon],
    ['待機', 'A', 'f', '', noon + 1 / 1440],
    ['待機', 'A', 'f', '', new Date(0)],
  ]);
  const never = () => assert.fail('a serial needs no date formatting');
  assert.equal(intake.duplicateMessage(fixture.header, asked, never), '既に実行中です（依頼: y@example.com / 12:03）');
  assert.equal(intake.duplicateMessage(fixture.header, anonymous, never), '既に実行中です（依頼: 不明 / 12:04）');
  assert.equal(intake.duplicateMessage(fixture.header, dated, () => '09:00'), '既に実行中です（依頼: 不明 / 09:00）');
});

test('a label must name exactly one PANEL_V2 sheet', () => {
  const panels = [
    { title: 'サーバーA', marker: 'PANEL_V2', label: 'A' },
    { title: 'A (旧)', marker: '', label: 'A' },
    { title: 'B1', marker: 'PANEL_V2', label: 'B' },
    { title: 'B2', marker: 'PANEL_V2', label: ' B ' },
  ];
  assert.deepEqual(intake.resolveLabel(panels, 'A'), { ok: true }, 'a sheet without the marker does not count');
  const twice = intake.resolveLabel(panels, 'B');
  assert.equal(twice.ok, false);
  assert.match(twice.message, /「B」が複数のパネルにあります（B1, B2）/);
  assert.match(intake.resolveLabel(panels, 'Z').message, /「Z」のパネルが見つかりません/);
  assert.match(intake.resolveLabel(panels, ' ').message, /G2/);
});

test('toasts for a row without a function and for a press taken in', () => {
  assert.equal(intake.noFunctionMessage(12), '12 行目には機能がありません');
  assert.equal(intake.queuedMessage('再起動 (5秒)', 'サーバーA'), '受け付けました: 再起動 (5秒)（サーバーA）');
});

const indexFixture = require('./fixtures/index-press.json');

test('a tick on the index becomes the very panel job sheetq writes for it (shared fixture)', () => {
  const p = indexFixture.press;
  const press = intake.indexPress({
    ...p, wallMs: wallClockMs(Date.parse(p.receivedAt), indexFixture.timeZone),
  });
  assert.deepEqual(intake.queueRow(indexFixture.header, press), indexFixture.row);
});

test('a panel already asked for is not asked again, whatever else the queue holds', () => {
  const header = indexFixture.header;
  const row = (command, args, state) => {
    const r = header.map(() => '');
    r[header.indexOf('command')] = command;
    r[header.indexOf('argsJSON')] = args;
    r[header.indexOf('状態')] = state;
    return r;
  };
  const rows = [
    row('sheetq.panels', '{"open":["A","B"]}', '待機'),
    row('sheetq.panels', '{"open":["C"]}', '完了'),
    row('sheetq.panels', 'not json', '待機'),
    row('echo', '{"open":["D"]}', '待機'),
  ];
  assert.equal(intake.panelAsked(header, rows, ' B '), true);
  assert.equal(intake.panelAsked(header, rows, 'C'), false, 'a finished job asks for nothing');
  assert.equal(intake.panelAsked(header, rows, 'D'), false, 'only panel jobs count');
  assert.match(intake.panelAskedMessage('B'), /「B」は準備中/);
  assert.match(intake.noLabelMessage(4), /^4 行目/);
});

test('who pressed is the event\'s user, or empty when Google does not say', () => {
  const user = (email) => ({ user: { getEmail: () => email } });
  assert.equal(intake.requesterOf(user('alice@example.com')), 'alice@example.com');
  assert.equal(intake.requesterOf(user('')), '', 'Google blanks people outside the domain');
  assert.equal(intake.requesterOf({}), '', 'an event without a user names no one');
  assert.equal(intake.requesterOf({ user: null }), '');
  assert.equal(intake.requesterOf({ user: ' bob@example.com ' }), 'bob@example.com',
    'a user given as text is taken as its e-mail');
});

test('one press has one taker: the standalone trigger on a protected queue, the bound simple trigger on an open one', () => {
  const { bound, standalone } = intake.INTAKE;
  assert.equal(intake.takesPresses(standalone, true), true);
  assert.equal(intake.takesPresses(bound, true), false,
    'the bound trigger leaves a protected queue alone, the owner\'s press included');
  assert.equal(intake.takesPresses(standalone, false), false,
    'on an open queue the standalone trigger would vouch for nothing');
  assert.equal(intake.takesPresses(bound, false), true);
  for (const q of [true, false]) {
    assert.equal(intake.takesPresses(bound, q) !== intake.takesPresses(standalone, q), true,
      'exactly one kind takes a press, whatever the order Google runs them in');
  }
});

test('a legacy record is one that names someone; accounts compare without case', () => {
  assert.equal(intake.ownerRecorded('owner@example.com'), true);
  assert.equal(intake.ownerRecorded(null), false, 'getProperty answers null when unset');
  assert.equal(intake.ownerRecorded(''), false);
  assert.equal(intake.ownerRecorded('  '), false);
  assert.equal(intake.sameAccount('Owner@Example.com', ' owner@example.com'), true);
  assert.equal(intake.sameAccount('', ''), false, 'no one is not the owner');
  assert.equal(intake.sameAccount('alice@example.com', 'owner@example.com'), false);
});

test('the legacy message names the trigger\'s owner and every step, none of them a bound function', () => {
  const m = intake.legacyTriggerMessage(' owner@example.com ');
  assert.match(m, /owner@example\.com のトリガー（onSheetqEdit）が残っています/);
  assert.match(m, /「トリガー」（Triggers）でこのトリガーを削除/);
  assert.match(m, /SHEETQ_TRIGGER_OWNER を削除/);
  assert.match(m, /スタンドアロン プロジェクトで installSheetqTrigger/);
  assert.doesNotMatch(m, /uninstallSheetqTrigger/, 'no bound function to run as the owner');
});

test('the standalone project\'s spreadsheet id: the property\'s value or the id in a pasted URL', () => {
  assert.deepEqual(intake.spreadsheetIdOf(' 1AbC-_9 '), { id: '1AbC-_9' });
  assert.deepEqual(intake.spreadsheetIdOf('https://docs.google.com/spreadsheets/d/1AbC-_9/edit#gid=0'), { id: '1AbC-_9' });
  for (const missing of [null, undefined, '', ' ']) {
    const { problem } = intake.spreadsheetIdOf(missing);
    assert.match(problem, /スクリプト プロパティ SHEETQ_SPREADSHEET_ID がありません/);
    assert.match(problem, /Project Settings/);
    assert.match(problem, /Script properties/);
  }
  assert.match(intake.spreadsheetIdOf('a b').problem, /SHEETQ_SPREADSHEET_ID の値 "a b" はスプレッドシートの ID ではありません/);
});

test('the standalone install needs a queue protected for the installer', () => {
  const me = 'owner@example.com';
  assert.match(intake.installQueueProblem(null, me), /_ジョブキュー がありません/);
  assert.match(intake.installQueueProblem({ protections: [] }, me), /保護されていません/);
  assert.match(intake.installQueueProblem({ protections: [{ canEdit: true, warningOnly: true }] }, me),
    /警告のみの保護は保護ではありません/);
  assert.match(intake.installQueueProblem({ protections: [{ canEdit: true }, { canEdit: false }] }, me),
    /owner@example\.com は _ジョブキュー の保護範囲の編集者ではない/, 'protections stack: every one must be the installer\'s');
  assert.equal(intake.installQueueProblem({ protections: [{ canEdit: true, warningOnly: false }] }, me), null);
});

test('only an edit trigger of onSheetqEdit is the intake\'s trigger', () => {
  assert.equal(intake.isIntakeTrigger({ handler: 'onSheetqEdit', eventType: 'ON_EDIT' }), true);
  const enumLike = { toString: () => 'ON_EDIT' };
  assert.equal(intake.isIntakeTrigger({ handler: 'onSheetqEdit', eventType: enumLike }), true,
    'ScriptApp.EventType values compare by name');
  assert.equal(intake.isIntakeTrigger({ handler: 'onSheetqEdit', eventType: 'ON_CHANGE' }), false);
  assert.equal(intake.isIntakeTrigger({ handler: 'backup', eventType: 'ON_EDIT' }), false);
});

test('install: creates once, keeps its own, refuses another account\'s naming it', () => {
  const me = 'owner@example.com';
  const mine = [{ handler: 'onSheetqEdit', eventType: 'ON_EDIT' }];
  const fresh = intake.installPlan([], null, me);
  assert.equal(fresh.create, true, 'nothing installed: create');
  assert.match(fresh.message, /owner@example\.com の権限/);
  assert.equal(intake.installPlan([], me, me).create, true,
    'recorded as mine but deleted by hand in the Triggers page: create it again');
  const again = intake.installPlan(mine, me, me);
  assert.equal(again.create, false, 'one of mine exists: never a second');
  assert.notEqual(again.refuse, true);
  assert.equal(intake.installPlan([{ handler: 'other', eventType: 'ON_EDIT' }], null, me).create, true,
    'another handler is not ours');
  const theirs = intake.installPlan([], 'admin@example.com', me);
  assert.equal(theirs.refuse, true, 'a second account\'s trigger would queue each press twice');
  assert.notEqual(theirs.create, true);
  assert.match(theirs.message, /admin@example\.com が入れています/);
  assert.match(theirs.message, /uninstallSheetqTrigger/);
  assert.match(theirs.message, /SHEETQ_TRIGGER_OWNER/, 'names the property to delete when it is stale');
  const elsewhere = intake.installPlan([{ handler: 'onSheetqEdit', eventType: 'ON_EDIT', sourceId: 'old' }], me, me, 'new');
  assert.equal(elsewhere.refuse, true, 'one standalone project serves one spreadsheet');
  assert.match(elsewhere.message, /スプレッドシート old のものです/);
  assert.equal(intake.installPlan([{ handler: 'onSheetqEdit', eventType: 'ON_EDIT', sourceId: 'new' }], me, me, 'new').create,
    false, 'the same spreadsheet\'s: kept');
});

test('uninstall clears the record only when it is the caller\'s or no one\'s', () => {
  assert.equal(intake.uninstallPlan('owner@example.com', 'owner@example.com').clear, true);
  assert.equal(intake.uninstallPlan(null, 'owner@example.com').clear, true);
  const theirs = intake.uninstallPlan('admin@example.com', 'owner@example.com');
  assert.equal(theirs.clear, false, 'another account\'s trigger stays recorded while it runs');
  assert.match(theirs.message, /admin@example\.com が uninstallSheetqTrigger/);
});

test('a write refused by the queue\'s protection is told plainly; other errors are not taken for it', () => {
  const google = 'Exception: You are trying to edit a protected cell or object. Please contact ' +
    'the spreadsheet owner to remove protection if you need to edit. (POST :batchUpdate answered 400)';
  const simple = intake.queueRefusedMessage(google, false, '');
  assert.match(simple, /_ジョブキュー は保護されていて/);
  assert.match(simple, /スタンドアロン Apps Script プロジェクトで installSheetqTrigger/, 'says what fixes it');
  const installable = intake.queueRefusedMessage(google, true, 'ed@example.com');
  assert.match(installable, /トリガーの所有者 ed@example\.com は _ジョブキュー の保護範囲の編集者ではありません/);
  assert.match(installable, /スタンドアロン プロジェクトで uninstallSheetqTrigger/);
  assert.equal(intake.queueRefusedMessage('Exception: Service Spreadsheets failed', false, ''), null);
  assert.equal(intake.queueRefusedMessage(undefined, false, ''), null);
});

test('a press never brings the continuation flag, whose args sheetq trusts on a protected queue', () => {
  assert.equal(intake.pressFlags('heavy, continuation'), 'heavy');
  assert.equal(intake.pressFlags('continuation'), '');
  assert.equal(intake.pressFlags(''), '');
  assert.equal(intake.pressFlags(' heavy ,x'), 'heavy,x');
});

test('a press never brings anything that looks like continuation either', () => {
  assert.equal(intake.pressFlags('heavy,continuation\u0085, Continuation ,\uff43ontinuation'), 'heavy',
    'U+0085 (which JavaScript\'s trim keeps and Rust\'s removes), another case, a fullwidth letter');
  for (const f of ['continuation\u00a0', '\u00a0continuation', 'conti\u200bnuation', '\ufeffcontinuation',
    'continuation\u200e', '\u202econtinuation', '\u3000continuation', 'CONTINUATION', 'continuation\n',
    'continuation\u00ad', '\uff23\uff4f\uff4e\uff54\uff49\uff4e\uff55\uff41\uff54\uff49\uff4f\uff4e',
    '\udb40\udc01continuation', '\tcontinuation\t']) {
    assert.equal(intake.pressFlags('heavy,' + f + ',x'), 'heavy,x', JSON.stringify(f));
  }
  assert.equal(intake.pressFlags('\u0441ontinuation'), '\u0441ontinuation',
    'a Cyrillic letter is another word, not a hidden character: sheetq reads it as no continuation too');
  assert.equal(intake.pressFlags('heavy\u0085,\u00a0x'), 'heavy\u0085,\u00a0x',
    'other flags are trimmed of spaces and tabs only and otherwise kept as they are, as sheetq keeps them');
});

// The sheet-text rule, held to the vectors src/sheet_text.rs is tested with.

const vectors = JSON.parse(fs.readFileSync(path.join(__dirname, '..', 'tests', 'vectors', 'sheet_text.json'), 'utf8'));

test('sheet-text vectors: trim removes spaces and tabs at both ends, and nothing else', () => {
  assert.ok(vectors.trim.length > 0);
  for (const [input, want] of vectors.trim) {
    assert.equal(intake.sheetTrim(input), want, `sheetTrim(${JSON.stringify(input)})`);
  }
});

function wantedHidden(v) {
  return v.first_hidden === undefined ? null : v.first_hidden;
}

test('sheet-text vectors: every comparison gets the verdict and first hidden code point the rule gives it', () => {
  assert.ok(vectors.compare.length > 0);
  for (const v of vectors.compare) {
    const what = `${JSON.stringify(v.sheet)} against ${JSON.stringify(v.config)}`;
    const got = intake.compareSheetText(v.sheet, v.config);
    assert.equal(got.verdict, v.verdict, what);
    assert.equal(got.firstHidden, wantedHidden(v), `${what}: first hidden`);
    assert.equal(intake.sameSheetText(v.sheet, v.config), v.verdict === 'same', `${what}: sameSheetText`);
  }
});

test('sheet-text vectors: the format ranges are exactly what this JavaScript calls \\p{Cf}', () => {
  const inRanges = (cp) => vectors.format_ranges.some(([lo, hi]) => cp >= lo && cp <= hi);
  const cf = /^\p{Cf}$/u;
  const disagree = [];
  for (let cp = 0; cp <= 0x10ffff; cp++) {
    if (cp >= 0xd800 && cp <= 0xdfff) continue;
    if (cf.test(String.fromCodePoint(cp)) !== inRanges(cp)) {
      disagree.push('U+' + cp.toString(16).toUpperCase().padStart(4, '0'));
    }
  }
  assert.deepEqual(disagree, [],
    `Node ${process.version} (Unicode ${process.versions.unicode}) and the vectors' format_ranges ` +
    `disagree on \\p{Cf} for ${disagree.join(', ')}`);
});

test('the skeleton drops White_Space, Cc and Cf, folds fullwidth ASCII and lowercases A-Z only', () => {
  assert.equal(intake.skeleton(' \u0085Con\u200btinu\uff41tion\u3000\u00a0'), 'continuation');
  assert.equal(intake.skeleton('\uff01\uff5e\uff5f'), '!~\uff5f', 'U+FF01-U+FF5E only');
  assert.equal(intake.skeleton('\u00c9\u0130'), '\u00c9\u0130', 'letters beyond A-Z keep their case');
  assert.equal(intake.compareSheetText('Deploy', 'deploy').verdict, 'lookalike');
  assert.deepEqual(intake.compareSheetText('deploy', 'Deploy'), { verdict: 'lookalike', firstHidden: 'U+0064' },
    'another case: the first code point the configured value does not hold');
  assert.equal(intake.isPlainSheetText('a b\tc'), true);
  assert.equal(intake.isPlainSheetText('a\u0085b'), false);
  assert.equal(intake.isPlainSheetText('a\ufeffb'), false);
});

// Every value read from the sheet that decides something is trimmed of spaces and tabs only,
// then compared code point for code point, as sheetq reads it.

test('a sheet is a panel only when its marker is the same text as PANEL_V2', () => {
  const panels = [
    { title: 'real', marker: ' PANEL_V2\t', label: 'A' },
    { title: 'nel', marker: 'PANEL_V2\u0085', label: 'B' },
    { title: 'nbsp', marker: '\u00a0PANEL_V2', label: 'B' },
    { title: 'bom', marker: '\ufeffPANEL_V2', label: 'B' },
    { title: 'case', marker: 'panel_v2', label: 'B' },
    { title: 'b', marker: 'PANEL_V2', label: 'B' },
  ];
  assert.deepEqual(intake.resolveLabel(panels, 'A'), { ok: true }, 'spaces and tabs aside');
  assert.deepEqual(intake.resolveLabel(panels, 'B'), { ok: true },
    'a marker that only looks like PANEL_V2 makes no panel, so B names one');
});

test('labels and functions are the same only up to spaces and tabs, as sheetq reads the queue', () => {
  const panels = [
    { title: 'B1', marker: 'PANEL_V2', label: 'B' },
    { title: 'B2', marker: 'PANEL_V2', label: 'B\u3000' },
  ];
  assert.deepEqual(intake.resolveLabel(panels, 'B'), { ok: true },
    'B and B + U+3000 are two labels to sheetq (sheet_text::trim), so to the script');
  assert.deepEqual(intake.resolveLabel(panels, 'B\u3000'), { ok: true });
  assert.match(intake.resolveLabel(panels, '\u00a0B').message, /のパネルが見つかりません/);

  const rows = queue([['待機', 'A', 'f'], ['待機', 'C\ufeff', 'g']]);
  assert.equal(intake.duplicateOf(fixture.header, rows, '\tA ', ' f\t'), rows[0]);
  assert.equal(intake.duplicateOf(fixture.header, rows, 'A', 'f\u00a0'), null,
    'JavaScript\'s trim would have made f + NBSP the function f');
  assert.equal(intake.duplicateOf(fixture.header, rows, 'C', 'g'), null);
  const never = () => assert.fail('no date');
  assert.equal(intake.cancelTargetOf(fixture.header, rows, 'A\ufeff', 'f', never), null);
  assert.equal(intake.cancelTargetOf(fixture.header, rows, 'C\ufeff', 'g', never), 1);
  assert.equal(intake.approvalTargetOf(fixture.header, queue([['承認待ち', 'A', 'f\u0085']]), 'A', 'f', never), null,
    'a 承認 tick approves only the job of the same function');
});

test('queue headers are known only when they are the same text', () => {
  const header = fixture.header.map((h) => (h === '状態' ? '状態\u00a0' : h));
  assert.throws(() => intake.queueColumns(header), /lacks the columns 状態/);
  const spaced = fixture.header.map((h) => (h === '状態' ? ' 状態\t' : h));
  assert.equal(intake.queueColumns(spaced).index.state, 10);
  const both = [...fixture.header, '状態\u0085'];
  assert.equal(intake.queueColumns(both).index.state, 10, 'a look-alike is one of people\'s own columns');
});

test('an index tick carries its label trimmed of spaces and tabs only, and is asked once', () => {
  const press = intake.indexPress({ jobId: 'j', wallMs: 0, indexSheet: '▶パネル', label: ' D\u3000' });
  assert.equal(press.fn, 'パネルを開く: D\u3000');
  assert.equal(press.argsJson, '{"open":["D\u3000"]}');
  const header = indexFixture.header;
  const row = (command, args) => {
    const r = header.map(() => '');
    r[header.indexOf('command')] = command;
    r[header.indexOf('argsJSON')] = args;
    r[header.indexOf('状態')] = '待機';
    return r;
  };
  assert.equal(intake.panelAsked(header, [row(' sheetq.panels ', '{"open":["D"]}')], 'D'), true);
  assert.equal(intake.panelAsked(header, [row('sheetq.panels\u0085', '{"open":["D"]}')], 'D'), false,
    'a command that only looks like the panel job is not one');
  assert.equal(intake.panelAsked(header, [row('sheetq.panels', '{"open":["D\u00a0"]}')], 'D'), false);
});

test('a 中止要求 sheetq might read otherwise is written over, never taken for a request', () => {
  const header = [...fixture.header, '中止要求'];
  const never = () => assert.fail('a serial needs no zone');
  const rows = queue([['待機', 'A', 'f', '', 1]]).map((r) => [...r, '']);
  rows[0][0] = 'job-1';
  const write = { index: 0, column: 16, jobId: 'job-1', message: '中止を要求しました: f（待機中のジョブは実行されません）' };
  for (const cell of ['\u0085', 'bob 2026/12/03 21:30:05\u0085#job-2', 'bob\ufeff#job-1', '止めて\u3000ください']) {
    rows[0][16] = cell;
    assert.deepEqual(intake.cancelPlan(header, rows, 'A', 'f', never), write, JSON.stringify(cell));
  }
  rows[0][16] = ' bob@example.com 2026/12/03 21:30:05 #job-1\t';
  assert.equal(intake.cancelPlan(header, rows, 'A', 'f', never).index, undefined, 'a plain request is kept');
  rows[0][16] = '止めて';
  assert.equal(intake.cancelPlan(header, rows, 'A', 'f', never).index, undefined,
    'one written by hand, naming no job, is kept as sheetq honours it');
});

test('a 承認 line is read, and written back, as sheetq reads it', () => {
  assert.deepEqual(intake.approvalLines('bob 2026/12/03 21:30:05 #job-1\ufeff\n\u3000\n'),
    ['bob 2026/12/03 21:30:05 #job-1\ufeff', '\u3000'],
    'no line is rewritten into one sheetq would count: sheetq reads #job-1 + U+FEFF as another job');
  assert.equal(intake.approvalBy('bob 2026/12/03 21:30:05 #job-1\ufeff', 'bob', 'job-1'), false);
  assert.equal(intake.approvalBy('bob 2026/12/03\ufeff21:30:05 #job-1', 'bob', 'job-1'), false,
    'JavaScript\'s \\s splits on U+FEFF where sheetq does not: the line is no approval to either');
  assert.equal(intake.approvalBy('bob 2026/12/03\t21:30:05 #job-1', 'bob', 'job-1'), true);
});

test('the queue may lack 中止要求 (made by an older sheetq); every other column it must have', () => {
  const cols = intake.queueColumns(fixture.header);
  assert.deepEqual(Object.keys(cols.index).sort(), Object.keys(intake.HEADERS).sort(),
    'every required column is found');
  assert.equal(cols.index.jobId, 0);
  assert.equal(cols.index.worker, 15);
  assert.equal('cancelRequest' in cols.index, false, 'the optional column is reported absent');
  assert.equal(cols.width, 16);

  const header = ['中止要求', ...fixture.header];
  const withIt = intake.queueColumns(header);
  assert.equal(withIt.index.cancelRequest, 0);
  assert.equal(withIt.index.jobId, 1);
  assert.equal(intake.queueColumns([...fixture.header, '中止要求']).width, 17,
    'as wide as the right-most known column, an optional one included, as sheetq counts it');
  assert.throws(() => intake.queueColumns([...header, '中止要求']), /"中止要求" appears twice/);
  assert.throws(() => intake.queueColumns(['中止要求', 'jobId']), /lacks the columns 受付日時/,
    'an optional column does not stand in for a required one');
});

test('■ stops the newest waiting or running job of its target and function, never a finished one', () => {
  const at = (h) => intake.serialOfWallClock(Date.UTC(2026, 11, 3, h));
  const never = () => assert.fail('a serial needs no zone');
  const rows = queue([
    ['実行中', 'A', 'f', '', at(9)],
    ['待機', 'A', 'f', '', at(11)],
    ['待機', 'A', 'f', '', at(10)],
    ['完了', 'A', 'f', '', at(12)],
    ['エラー', 'A', 'f', '', at(12)],
    ['タイムアウト', 'A', 'f', '', at(12)],
    ['キャンセル', 'A', 'f', '', at(13)],
    ['待機', 'B', 'f', '', at(14)],
    ['待機', 'A', 'g', '', at(15)],
  ]);
  const header = fixture.header;
  assert.equal(intake.cancelTargetOf(header, rows, 'A', 'f', never), 1, 'the latest 受付日時 of A / f');
  assert.equal(intake.cancelTargetOf(header, rows, ' A ', 'f ', never), 1, 'compared trimmed');
  assert.equal(intake.cancelTargetOf(header, rows.slice(3), 'A', 'f', never), null,
    '完了, エラー, タイムアウト and キャンセル are never stopped, nor other targets\' or functions\' jobs');
  assert.equal(intake.cancelTargetOf(header, rows, 'B', 'f', never), 7);
  assert.equal(intake.cancelTargetOf(header, rows, 'A', 'h', never), null);

  const tie = queue([['待機', 'A', 'f', '', at(9)], ['実行中', 'A', 'f', '', at(9)], ['待機', 'A', 'f', '', '']]);
  assert.equal(intake.cancelTargetOf(header, tie, 'A', 'f', never), 1,
    'on a tie the lower row; a 受付日時 that is no date is the oldest');

  const byPanel = queue([['待機', 'C', 'f', '', at(9)], ['待機', '', 'f', '', at(8), 'C'], ['待機', '', 'f', '', at(7), 'D']]);
  assert.equal(intake.cancelTargetOf(header, byPanel.slice(1), 'C', 'f', never), 0,
    'an empty 対象ラベル falls back to パネルシート名');
  assert.equal(intake.cancelTargetOf(header, byPanel, 'C', 'f', never), 0);
  assert.equal(intake.cancelTargetOf(header, queue([['待機', '', 'f', '', at(9), '']]), ' ', 'f', never), null,
    'a panel without a label stops nothing');

  // 11:00 in Tokyo read as a Date (a date-formatted cell) is newer than the 10:00 serial;
  // without the zone it would read 02:00.
  const mixed = queue([['待機', 'A', 'f', '', at(10)], ['待機', 'A', 'f', '', new Date(Date.UTC(2026, 11, 3, 2))], ['待機', 'A', 'f', '', at(9)]]);
  const tokyo = (d) => d.getTime() + 9 * 3600000;
  assert.equal(intake.cancelTargetOf(header, mixed, 'A', 'f', tokyo), 1, 'a Date is read on the sheet\'s clock');
});

test('the 中止要求 text is who ticked, the date and time, then the job it is meant for', () => {
  const time = '2026/12/03 21:30:05';
  const text = intake.cancelRequestText('alice@example.com', time, 'job-1');
  assert.equal(text, 'alice@example.com 2026/12/03 21:30:05 #job-1');
  const words = text.split(/\s+/);
  assert.equal(words.slice(-3, -1).join(' '), time, 'sheetq reads the two words before #jobId as the time');
  assert.equal(words.slice(0, -3).join(' '), 'alice@example.com');
  assert.equal(intake.cancelRequestText('', time, 'j'), '不明 2026/12/03 21:30:05 #j', 'Google did not say who');
  assert.equal(intake.cancelRequestText(undefined, time, 'j'), '不明 2026/12/03 21:30:05 #j');
  assert.equal(intake.cancelRequestText(' bob@example.com ', time, 'j'), 'bob@example.com 2026/12/03 21:30:05 #j');
});

test('a ■ tick writes one request into an empty 中止要求, and otherwise only says why not', () => {
  const header = [...fixture.header, '中止要求'];
  const never = () => assert.fail('a serial needs no zone');
  const rows = queue([['完了', 'A', 'f', '', 2], ['待機', 'A', 'f', '', 1], ['実行中', 'A', 'g', '', 1]])
    .map((r) => [...r, '']);
  const job = (i) => String(rows[i][0]);
  assert.deepEqual(intake.cancelPlan(header, rows, 'A', 'f', never),
    { index: 1, column: 16, jobId: job(1), message: '中止を要求しました: f（待機中のジョブは実行されません）' });
  assert.deepEqual(intake.cancelPlan(header, rows, 'A', 'g', never),
    { index: 2, column: 16, jobId: job(2), message: '中止を要求しました: g（実行中のジョブを止めます）' });

  rows[1][16] = 'bob@example.com 2026/12/03 21:30:05 #another-job';
  assert.deepEqual(intake.cancelPlan(header, rows, 'A', 'f', never),
    { index: 1, column: 16, jobId: job(1), message: '中止を要求しました: f（待機中のジョブは実行されません）' },
    'a request a sort left on this row for another job is no request for this one');
  rows[1][16] = 'bob@example.com 2026/12/03 21:30:05 #' + job(1);
  assert.deepEqual(intake.cancelPlan(header, rows, 'A', 'f', never),
    { message: '既に中止を要求済みです: f（要求: bob@example.com 2026/12/03 21:30:05 #' + job(1) + '）' },
    'a request already there is kept');
  assert.deepEqual(intake.cancelPlan(header, rows, 'A', 'h', never),
    { message: 'h に中止できるジョブはありません（待機中・承認待ち・実行中のジョブがありません）' });

  const old = rows.map((r) => r.slice(0, 16));
  assert.deepEqual(intake.cancelPlan(fixture.header, old, 'A', 'f', never),
    { message: '中止できません: _ジョブキュー に「中止要求」列がありません。`sheetq init` を実行すると追加されます' });
  assert.deepEqual(intake.cancelPlan(fixture.header, old, 'A', 'h', never),
    { message: 'h に中止できるジョブはありません（待機中・承認待ち・実行中のジョブがありません）' },
    'with no job to stop, the missing column does not matter');
});

test('the ■ boxes an edit covers: column F from row 8, alone or in a pasted block', () => {
  assert.deepEqual(intake.cancelCells(8, 6, 1, 1), { first: 8, count: 1 });
  assert.equal(intake.cancelCells(7, 6, 1, 1), null, 'row 7 is the table\'s header');
  assert.equal(intake.cancelCells(8, 1, 1, 1), null, 'a ▶ box');
  assert.equal(intake.cancelCells(8, 7, 3, 2), null);
  assert.deepEqual(intake.cancelCells(8, 1, 1, 10), { first: 8, count: 1 }, 'a paste over a whole row');
  assert.deepEqual(intake.cancelCells(5, 4, 10, 3), { first: 8, count: 7 });
  assert.equal(intake.cancelCells(1, 1, 2, 2), null);
});

// Approvals: a job of a function with `approvers` waits as 承認待ち until enough of them
// tick 承認 (column K of its panel row); each tick adds a line to the job's 承認 cell.

test('the queue may lack 承認 as it may lack 中止要求; found by name like the others', () => {
  assert.equal(intake.OPTIONAL_HEADERS.approvals, '承認');
  assert.equal('approvals' in intake.queueColumns(fixture.header).index, false);
  const cols = intake.queueColumns([...fixture.header, '中止要求', '承認']);
  assert.equal(cols.index.cancelRequest, 16);
  assert.equal(cols.index.approvals, 17);
  assert.equal(cols.width, 18, 'as wide as the right-most known column, 承認 included');
  assert.equal(intake.queueColumns(['承認', ...fixture.header]).index.approvals, 0, 'in any place');
  assert.throws(() => intake.queueColumns([...fixture.header, '承認', '承認']), /"承認" appears twice/);
  assert.equal(intake.PANEL.approveColumn, 11, 'the 承認 boxes are column K of a panel');
});

test('each approver has a 承認 column of its own, headed 承認, 承認 2, …', () => {
  for (const h of ['承認', '承認 2', ' 承認 12\t']) {
    assert.ok(intake.isApprovalHeader(h), `${JSON.stringify(h)} heads 承認 boxes`);
  }
  for (const h of ['', '承認者', '承認\u200b', 'システムフラグ', '承認 x']) {
    assert.ok(!intake.isApprovalHeader(h), `${JSON.stringify(h)} does not`);
  }
});

test('only 待機, 承認待ち and 実行中 are jobs not finished; 却下 and 期限切れ are final', () => {
  for (const s of ['待機', '承認待ち', '実行中']) assert.equal(intake.isPending(s), true, s);
  for (const s of ['完了', 'エラー', 'タイムアウト', 'キャンセル', '却下', '期限切れ', '']) {
    assert.equal(intake.isPending(s), false, s);
  }
  assert.equal(intake.AWAITING_APPROVAL, '承認待ち');
});

test('a press while one awaits approval is a duplicate, and is told it awaits approval', () => {
  const noon = intake.serialOfWallClock(Date.UTC(2026, 10, 30, 12, 3));
  const rows = queue([
    ['却下', 'A', 'f', 'x@example.com', noon],
    ['期限切れ', 'A', 'f', 'x@example.com', noon],
    ['承認待ち', 'A', 'g', 'y@example.com', noon],
  ]);
  const header = fixture.header;
  assert.equal(intake.duplicateOf(header, rows, 'A', 'f'), null, '却下 and 期限切れ are finished');
  assert.equal(intake.duplicateOf(header, rows, 'A', 'g'), rows[2]);
  const never = () => assert.fail('a serial needs no date formatting');
  assert.equal(intake.duplicateMessage(header, rows[2], never), '承認待ちです（依頼: y@example.com / 12:03）');
  const [anonymous] = queue([['承認待ち', 'A', 'g', '', new Date(0)]]);
  assert.equal(intake.duplicateMessage(header, anonymous, () => '09:00'), '承認待ちです（依頼: 不明 / 09:00）');
});

test('■ stops a job awaiting approval as it stops a waiting one, and never a rejected or expired one', () => {
  const at = (h) => intake.serialOfWallClock(Date.UTC(2026, 11, 3, h));
  const never = () => assert.fail('a serial needs no zone');
  const header = [...fixture.header, '中止要求', '承認'];
  const rows = queue([
    ['承認待ち', 'A', 'f', 'alice@example.com', at(9)],
    ['却下', 'A', 'f', '', at(10)],
    ['期限切れ', 'A', 'f', '', at(11)],
  ]).map((r, i) => [...r, '', ''].map((v, c) => (c === 0 ? 'job-' + i : v)));
  assert.equal(intake.cancelTargetOf(header, rows, 'A', 'f', never), 0);
  assert.equal(intake.cancelTargetOf(header, rows.slice(1), 'A', 'f', never), null);
  assert.deepEqual(intake.cancelPlan(header, rows, 'A', 'f', never),
    { index: 0, column: 16, jobId: 'job-0', message: '中止を要求しました: f（承認待ちのジョブは実行されません）' });
});

test('承認 approves the newest job awaiting approval of its target and function, and no other', () => {
  const at = (h) => intake.serialOfWallClock(Date.UTC(2026, 11, 3, h));
  const never = () => assert.fail('a serial needs no zone');
  const header = fixture.header;
  const rows = queue([
    ['承認待ち', 'A', 'f', '', at(9)],
    ['承認待ち', 'A', 'f', '', at(11)],
    ['承認待ち', 'A', 'f', '', at(10)],
    ['待機', 'A', 'f', '', at(12)],
    ['実行中', 'A', 'f', '', at(12)],
    ['完了', 'A', 'f', '', at(13)],
    ['却下', 'A', 'f', '', at(13)],
    ['期限切れ', 'A', 'f', '', at(13)],
    ['承認待ち', 'B', 'f', '', at(14)],
    ['承認待ち', 'A', 'g', '', at(15)],
  ]);
  assert.equal(intake.approvalTargetOf(header, rows, 'A', 'f', never), 1, 'the latest 受付日時 of A / f');
  assert.equal(intake.approvalTargetOf(header, rows, ' A ', 'f ', never), 1, 'compared trimmed');
  assert.equal(intake.approvalTargetOf(header, rows.slice(3, 8), 'A', 'f', never), null,
    'a waiting or running job needs no approval, a finished one takes none');
  assert.equal(intake.approvalTargetOf(header, rows, 'B', 'f', never), 8);
  assert.equal(intake.approvalTargetOf(header, rows, 'A', 'h', never), null);
  const tie = queue([['承認待ち', 'A', 'f', '', at(9)], ['承認待ち', 'A', 'f', '', at(9)], ['承認待ち', 'A', 'f', '', '']]);
  assert.equal(intake.approvalTargetOf(header, tie, 'A', 'f', never), 1,
    'on a tie the lower row; a 受付日時 that is no date is the oldest');
  const byPanel = queue([['承認待ち', '', 'f', '', at(8), 'C']]);
  assert.equal(intake.approvalTargetOf(header, byPanel, 'C', 'f', never), 0,
    'an empty 対象ラベル falls back to パネルシート名');
  assert.equal(intake.approvalTargetOf(header, queue([['承認待ち', '', 'f', '', at(9), '']]), ' ', 'f', never), null,
    'a panel without a label approves nothing');
});

test('a 承認 cell holds one approval a line; a line counts for its own job and person only', () => {
  assert.deepEqual(intake.approvalLines(''), []);
  assert.deepEqual(intake.approvalLines(undefined), []);
  assert.deepEqual(intake.approvalLines(' a 2026/12/03 21:30:05 #j \r\n\n b 2026/12/03 21:31:00 #j\n'),
    ['a 2026/12/03 21:30:05 #j', 'b 2026/12/03 21:31:00 #j']);
  const line = 'Bob@Example.com 2026/12/03 21:30:05 #job-1';
  assert.equal(intake.approvalBy(line, 'bob@example.com', 'job-1'), true, 'who is compared case-blind');
  assert.equal(intake.approvalBy(line, 'bob@example.com', 'job-2'), false, 'a line for another job');
  assert.equal(intake.approvalBy(line, 'carol@example.com', 'job-1'), false);
  assert.equal(intake.approvalBy('bob@example.com 2026/12/03 21:30:05', 'bob@example.com', 'job-1'), false,
    'a line that names no job is no approval: a sort may have copied it from another row, as sheetq reads it');
  assert.equal(intake.approvalBy('bob@example.com 2026/12/03 21:30:05', 'carol@example.com', 'job-1'), false);
  assert.equal(intake.approvalBy('2026/12/03 21:30:05 #job-1', '', 'job-1'), false, 'a line by no one is no one\'s');
  assert.equal(intake.approvalBy('#job-1', '', 'job-1'), false);
});

test('a 承認 tick adds the approver\'s line, and otherwise only says why not', () => {
  const header = [...fixture.header, '中止要求', '承認'];
  const never = () => assert.fail('a serial needs no zone');
  const time = '2026/12/03 21:30:05';
  const rows = queue([
    ['完了', 'A', 'f', 'alice@example.com', 2],
    ['承認待ち', 'A', 'f', 'Alice@Example.com', 1],
    ['待機', 'A', 'g', 'alice@example.com', 1],
  ]).map((r, i) => [...r, '', ''].map((v, c) => (c === 0 ? 'job-' + i : v)));
  const plan = (who, fn = 'f', h = header, rs = rows) => intake.approvalPlan(h, rs, 'A', fn, who, time, never);

  assert.deepEqual(plan('bob@example.com'), {
    index: 1,
    column: 17,
    jobId: 'job-1',
    text: 'bob@example.com 2026/12/03 21:30:05 #job-1',
    message: '承認を記録しました: f（bob@example.com）。sheetq が承認者かどうかを確かめ、承認者の承認だけを数えます',
  }, 'the first approval: one line, as the 中止要求 text is worded');
  assert.equal(plan(' bob@example.com ').text, 'bob@example.com 2026/12/03 21:30:05 #job-1', 'who trimmed');

  assert.deepEqual(plan('bob@example.com', 'g'), { message: 'g に承認待ちのジョブはありません' },
    'a waiting job needs no approval');
  assert.deepEqual(plan('bob@example.com', 'h'), { message: 'h に承認待ちのジョブはありません' });

  const old = rows.map((r) => r.slice(0, 17));
  assert.deepEqual(plan('bob@example.com', 'f', header.slice(0, 17), old),
    { message: '承認できません: _ジョブキュー に「承認」列がありません。`sheetq init` を実行すると追加されます' });
  assert.deepEqual(plan('bob@example.com', 'h', header.slice(0, 17), old),
    { message: 'h に承認待ちのジョブはありません' }, 'with nothing to approve, the missing column does not matter');

  for (const nobody of ['', '  ', undefined, null]) {
    const p = plan(nobody);
    assert.equal(p.index, undefined, 'an approval by no one is never written');
    assert.match(p.message, /^承認できません: Google が押した人をスクリプトに知らせなかった/);
    assert.match(p.message, /installSheetqTrigger/, 'says what records approvals');
  }

  assert.deepEqual(plan('alice@example.com'),
    { message: '自分の依頼は承認できません: f（依頼者以外の承認者が承認してください）' },
    'the one who asked cannot approve, compared case-blind');

  rows[1][17] = 'carol@example.com 2026/12/03 21:00:00 #job-1\nBOB@example.com 2026/12/03 21:10:00 #job-1';
  assert.deepEqual(plan('bob@example.com'), { message: '既に承認済みです: f（bob@example.com）' },
    'one person approves a job once');
  const dave = plan('dave@example.com');
  assert.equal(dave.text,
    'carol@example.com 2026/12/03 21:00:00 #job-1\nBOB@example.com 2026/12/03 21:10:00 #job-1\n' +
    'dave@example.com 2026/12/03 21:30:05 #job-1', 'the lines there are kept, the new one last');
  assert.equal(dave.index, 1);

  rows[1][17] = 'bob@example.com 2026/12/03 21:10:00';
  assert.equal(plan('bob@example.com').index, 1,
    'a line naming no job (copied along by a sort) is no approval of this one');

  const anonymous = rows.map((r) => [...r]);
  anonymous[1][header.indexOf('依頼者')] = '';
  assert.deepEqual(plan('bob@example.com', 'f', header, anonymous),
    { message: '承認できません: f の依頼者が分からないため、依頼者以外の承認かを確かめられません' },
    'a job whose requester nobody knows takes no approval');

  rows[1][17] = 'bob@example.com 2026/12/03 21:10:00 #another-job\n';
  assert.equal(plan('bob@example.com').text,
    'bob@example.com 2026/12/03 21:10:00 #another-job\nbob@example.com 2026/12/03 21:30:05 #job-1',
    'an approval a sort left on this row for another job is no approval of this one');
});

test('a press is answered at once with what it waits for: the jobs of its own target ahead', () => {
  const header = fixture.header;
  const row = (target, state) => {
    const r = header.map(() => '');
    r[header.indexOf('対象ラベル')] = target;
    r[header.indexOf('状態')] = state;
    return r;
  };
  assert.equal(intake.pressStatus(header, [], 'A'), '⏳ 受付済み (開始待ち)');
  const rows = [row('A', '実行中'), row('B', '待機'), row('A', '待機'), row('A', '完了'), row('A', '承認待ち')];
  assert.equal(intake.pressStatus(header, rows, 'A'), '⏳ 順番待ち (前に 2 件)',
    'the running job and the waiting one of A; not B, not a finished or awaiting one');
  assert.equal(intake.pressStatus(header, rows, ' B '), '⏳ 順番待ち (前に 1 件)', 'trimmed as sheetq reads it');
  assert.equal(intake.pressStatus(header, rows, 'C'), intake.RECEIVED_TEXT);
});

test('the received text is the daemon\'s own', () => {
  const claim = fs.readFileSync(path.join(__dirname, '..', 'src', 'claim.rs'), 'utf8');
  assert.ok(claim.includes(`pub const RECEIVED_TEXT: &str = "${intake.RECEIVED_TEXT}";`),
    'src/claim.rs RECEIVED_TEXT and intake.js RECEIVED_TEXT must say the same');
  assert.ok(claim.includes('format!("⏳ 順番待ち (前に {ahead} 件)")'));
});

test('no daemon alive is judged from the heartbeat rows changing on the script\'s own clock', () => {
  const limit = intake.NO_DAEMON_AFTER_MS;
  const first = intake.daemonLiveness(null, 'h1', 1000);
  assert.equal(first.alive, null, 'a first look tells nothing');
  assert.deepEqual(first.seen, { sig: 'h1', since: 1000 });
  const soon = intake.daemonLiveness(first.seen, 'h2', 1000 + 30000);
  assert.equal(soon.alive, true, 'the rows changed within the limit: a daemon writes them');
  const still = intake.daemonLiveness(soon.seen, 'h2', 1000 + 30000 + limit);
  assert.equal(still.alive, null, 'unchanged for no longer than the limit: not told yet');
  const dead = intake.daemonLiveness(soon.seen, 'h2', 1000 + 30000 + limit + 1);
  assert.equal(dead.alive, false, 'unchanged for longer than the limit: no daemon answers');
  assert.equal(dead.seen.since, 31000, 'the record keeps when the rows were first seen so');
  const late = intake.daemonLiveness(dead.seen, 'h3', 31000 + 10 * limit);
  assert.equal(late.alive, null, 'a change seen only after a long while tells nothing of now');
  assert.equal(intake.daemonLiveness({ junk: 1 }, 'h', 5).alive, null, 'a record of another shape is none');
  assert.match(intake.NO_DAEMON_TEXT, /^⏳ 受付済み/, 'the press is still received');
});

test('the index\'s 状況 after a press is worded as sheetq words it', () => {
  const header = ['jobId', '受付日時', '依頼者', 'パネルシート名', 'パネル行', '対象ラベル', '機能ラベル',
    'command', 'argsJSON', 'システムフラグ', '状態', '開始日時', '終了日時', '結果URL', 'メッセージ', 'ワーカー'];
  const row = (target, fn, state) => ['j', 1, '', target, '', target, fn, 'c', '{}', '', state, '', '', '', '', ''];
  const rows = [row('A', '再起動', '実行中'), row('A', '確認', '待機'), row('A', 'x', '承認待ち'), row('B', 'y', '完了')];
  assert.equal(intake.indexStateText(header, rows, 'A', null), '▶ 実行中: 再起動 (待機 1 件) · 承認待ち 1 件');
  assert.equal(intake.indexStateText(header, [row('C', 'z', '待機')], 'C', false), '⏳ 待機 1 件 · sheetq 停止中');
  assert.equal(intake.indexStateText(header, rows, 'B', false), '', 'nothing running or waiting: empty, as sheetq leaves it');
});

test('a press takes the inputs its row shows, a date as its day, and never guesses a missing one', () => {
  // The spec (hidden, protected G) says where each value is: never a header anyone may edit.
  const spec = JSON.stringify([['version', 'バージョン', 13], ['dry_run', 'dry_run', 15], ['day', '日付', 17]]);
  const row = (versionLabel) => [true, 'デプロイ', '', '', '', false, spec, 'deploy', '{"mode":"rolling"}',
    '', '', versionLabel, ' 1.2.4 ', 'dry_run', false, '日付', new Date(Date.UTC(2027, 0, 14, 15))];
  const day = (d) => d.toISOString().slice(0, 10);
  const taken = intake.pressInputs(row('バージョン'), spec, day);
  assert.deepEqual(taken, {
    ok: true,
    inputs: { version: '1.2.4', dry_run: false, day: '2027-01-14' },
    text: 'version=1.2.4, dry_run=false, day=2027-01-14',
  });
  assert.equal(
    intake.argsWithInputs('{"mode":"rolling"}', taken.inputs),
    '{"mode":"rolling","version":"1.2.4","dry_run":false,"day":"2027-01-14"}',
  );
  const moved = intake.pressInputs(row('版'), spec, day);
  assert.equal(moved.ok, false, 'a label not where the spec puts it refuses the press');
  assert.match(moved.message, /入力「バージョン」が見当たらない/);
  // Someone writes the label and a value of their own further right, under a header "入力"
  // of their own: the press still reads only the spec's columns.
  const decoy = row('バージョン').concat(['入力', 'バージョン', '9.9.9']);
  assert.equal(intake.pressInputs(decoy, spec, day).inputs.version, '1.2.4');
  assert.deepEqual(intake.pressInputs(row('x'), '', day).inputs, {},
    'a function without inputs takes none');
  const blank = row('バージョン');
  blank[12] = '  ';
  assert.deepEqual(intake.pressInputs(blank, spec, day).inputs, { dry_run: false, day: '2027-01-14' },
    'an empty cell is left out, so the default applies');
  assert.equal(intake.argsWithInputs('not json', { version: '1' }), 'not json',
    'args it cannot read stay as they are, for the daemon to refuse');
  assert.deepEqual(
    intake.inputResets(JSON.stringify([['version', 'バージョン', 13, ''], ['dry_run', 'dry_run', 15, true]])),
    [{ column: 13, value: '' }, { column: 15, value: true }],
    'reset_inputs puts each value cell back to its default',
  );
  assert.deepEqual(intake.inputResets(spec), [], 'without reset_inputs, nothing is reset');
  const sneaky = row('バージョン');
  sneaky[12] = 'x, dry_run=true';
  assert.equal(intake.pressInputs(sneaky, spec, day).text,
    'version="x, dry_run=true", dry_run=false, day=2027-01-14',
    'a text that could pass for another input is quoted');
});

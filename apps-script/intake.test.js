// node --test apps-script/: the pure intake functions of the Apps Script trigger.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
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

// node --test apps-script/: the Apps Script runtime that runs Code.js in tests (runtime/gas.js),
// its date handling checked against what Apps Script documents.
'use strict';

const test = require('node:test');
const assert = require('node:assert/strict');
const { formatDate, instantOfWallClock, wallClockMs } = require('./runtime/gas.js');

test('formatDate writes SimpleDateFormat patterns in the given zone', () => {
  const d = new Date(Date.UTC(2026, 11, 2, 1, 4, 5, 67));
  assert.equal(formatDate(d, 'Asia/Tokyo', 'HH:mm'), '10:04');
  assert.equal(formatDate(d, 'Asia/Tokyo', "yyyy-MM-dd'T'HH:mm:ss.SSS'Z'"),
    '2026-12-02T10:04:05.067Z');
  assert.equal(formatDate(d, 'America/New_York', "yyyy-MM-dd HH 'o''clock' ''"),
    "2026-12-01 20 o'clock '");
  assert.throws(() => formatDate(d, 'Asia/Tokyo', 'EEE'), /not supported/,
    'a letter it does not know is an error, never a guess');
});

test('a wall clock read in a zone is the instant that shows it, the earlier one when it repeats', () => {
  const tokyo = Date.UTC(2026, 11, 2, 10, 4);
  assert.equal(instantOfWallClock(tokyo, 'Asia/Tokyo'), Date.UTC(2026, 11, 2, 1, 4));
  // New York falls back on 2026-11-01: 01:30 happens twice; Apps Script reads the first.
  const twice = Date.UTC(2026, 10, 1, 1, 30);
  const first = instantOfWallClock(twice, 'America/New_York');
  assert.equal(first, Date.UTC(2026, 10, 1, 5, 30), '01:30 EDT');
  assert.equal(wallClockMs(first, 'America/New_York'), twice);
});

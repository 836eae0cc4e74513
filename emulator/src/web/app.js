// The web view of sheetq's local spreadsheets: shows one sheet of one spreadsheet as Google
// Sheets displays it (a picker switches between the spreadsheets the emulator holds; the
// address keeps the one shown as ?spreadsheet=ID), follows changes live (a long poll on
// /_emulator/web/view), and sends a person's edits (tick, type, sort, insert, delete) to
// /_emulator/web/edit as spreadsheets.batchUpdate requests, as the person picked in the
// toolbar (the owner unless another address is given; the address keeps it as ?as=EMAIL).
// No framework, no build step: this file is served as it is from the binary.
'use strict';

const ROW_H = 24;
/** People the identity picker offers besides the owner; any other address may be typed. */
const PEOPLE = ['alice@example.com', 'bob@example.com'];
const state = {
  spreadsheet: new URLSearchParams(location.search).get('spreadsheet'),
  // The person editing: null for the spreadsheet's owner.
  person: new URLSearchParams(location.search).get('as'),
  sheet: null,
  version: 0,
  drawn: null,
  view: null,
  sel: null,
  editing: false,
  // Hidden columns drawn (striped) instead of left out, as Sheets' "unhide" shows them.
  showHidden: false,
  // The request log leaves out reads that succeeded (idle polls) and token fetches.
  quiet: true,
};
const $ = (id) => document.getElementById(id);

function letters(i) {
  let s = '';
  for (let n = i + 1; n > 0; n = Math.floor((n - 1) / 26)) {
    s = String.fromCharCode(65 + ((n - 1) % 26)) + s;
  }
  return s;
}

function sleep(ms) {
  return new Promise((r) => setTimeout(r, ms));
}

function setLive(up) {
  const el = $('live');
  el.textContent = up ? '● live' : '● disconnected, retrying';
  el.classList.toggle('down', !up);
}

/** The view, and the spreadsheet it was asked for (`null`: the emulator's first). */
async function fetchView(after) {
  const asked = state.spreadsheet;
  const params = new URLSearchParams();
  if (after !== undefined) params.set('after', String(after));
  if (asked !== null) params.set('spreadsheet', asked);
  if (state.sheet !== null) params.set('sheet', String(state.sheet));
  if (state.person !== null) params.set('as', state.person);
  if (state.quiet) params.set('quiet', 'true');
  const res = await fetch('/_emulator/web/view?' + params, { cache: 'no-store' });
  if (!res.ok) throw new Error('view: HTTP ' + res.status);
  return { view: await res.json(), asked };
}

function take({ view, asked }) {
  state.version = view.version;
  // A long poll sent before the person picked another spreadsheet answers for the old one:
  // take only what is the emulator's (the picker, each account's rates).
  if (asked !== state.spreadsheet) {
    if (state.view) {
      state.view = Object.assign({}, state.view, { spreadsheets: view.spreadsheets, rates: view.rates, quota: view.quota });
      renderPicker();
      renderSide();
    }
    return;
  }
  // The emulator shows its first spreadsheet when the one asked for is not (or no longer)
  // there: follow it, and say so in the address.
  const shown = view.spreadsheet ? view.spreadsheet.id : null;
  if (shown !== state.spreadsheet) {
    state.spreadsheet = shown;
    state.sel = null;
    if (asked !== null) {
      state.sheet = null;
      remember(shown);
    }
  }
  // A long poll that saw no change sends no grid: keep the one shown.
  if (!view.sheet && state.view && state.view.sheet) view.sheet = state.view.sheet;
  // The sheet shown was deleted: follow the server to the first visible one.
  if (state.sheet !== null && !(view.tabs || []).some((t) => t.id === state.sheet)) {
    state.sheet = null;
    state.sel = null;
  }
  // A long poll sent before the person chose another tab answers for the old tab: keep
  // the grid of the tab chosen (its own fetch draws it) and take only the rest.
  const stale = state.sheet !== null && view.sheet && view.sheet.id !== state.sheet;
  if (!stale) {
    state.view = view;
    if (view.sheet) state.sheet = view.sheet.id;
    // Redraw only what changed: a redraw every second would take the keyboard focus away.
    const drawn = view.version + ':' + state.spreadsheet + ':' + state.sheet;
    if (!state.editing && drawn !== state.drawn) {
      renderSheet();
      state.drawn = drawn;
    }
  } else if (state.view) {
    state.view = Object.assign({}, view, { sheet: state.view.sheet });
  }
  renderPicker();
  renderPeople();
  renderTabs();
  renderSide();
  document.body.dataset.version = String(view.version);
}

async function loop() {
  await refresh();
  for (;;) {
    try {
      take(await fetchView(state.version));
      setLive(true);
    } catch (e) {
      setLive(false);
      await sleep(1000);
    }
  }
}

async function refresh() {
  try {
    take(await fetchView());
  } catch (e) {
    setLive(false);
  }
}

// ---- a person's edits ---------------------------------------------------------------

async function edit(requests, what) {
  return post('/_emulator/web/edit', { requests }, what);
}

/** The spreadsheet a person's edit goes to (the one shown), and who makes it. */
function target(path) {
  const params = new URLSearchParams();
  if (state.spreadsheet !== null) params.set('spreadsheet', state.spreadsheet);
  if (state.person !== null) params.set('as', state.person);
  const query = params.toString();
  return query ? path + '?' + query : path;
}

async function post(path, body, what) {
  $('message').textContent = '';
  try {
    const res = await fetch(target(path), {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify(body),
    });
    const reply = await res.json();
    if (!res.ok) $('message').textContent = what + ' as ' + who() + ' failed: ' + (reply.error || res.status);
  } catch (e) {
    $('message').textContent = what + ' failed: ' + e.message;
  }
  await refresh();
}

function cellRange(r, c) {
  return { sheetId: state.sheet, startRowIndex: r, endRowIndex: r + 1, startColumnIndex: c, endColumnIndex: c + 1 };
}

/** A tick or untick: the checkbox's value, as a person clicking it sets it. */
function setBox(r, c, value) {
  return edit([{ updateCells: { range: cellRange(r, c), rows: [{ values: [{ userEnteredValue: { boolValue: value } }] }], fields: 'userEnteredValue' } }],
    'ticking ' + letters(c) + (r + 1));
}

/** Typing into a cell: the server parses it as Sheets parses typing (USER_ENTERED). */
function typeIn(r, c, text) {
  return post('/_emulator/web/type', { sheet: state.sheet, row: r, col: c, text }, 'editing ' + letters(c) + (r + 1));
}

function sortBy(order) {
  const s = state.view.sheet;
  const c = state.sel.c;
  return edit([{
    sortRange: {
      range: { sheetId: s.id, startRowIndex: s.frozenRows, endRowIndex: s.rowCount, startColumnIndex: 0, endColumnIndex: s.columnCount },
      sortSpecs: [{ dimensionIndex: c, sortOrder: order }],
    },
  }], 'sorting');
}

function insertRow() {
  const r = state.sel.r;
  return edit([{
    insertDimension: {
      range: { sheetId: state.sheet, dimension: 'ROWS', startIndex: r, endIndex: r + 1 },
      inheritFromBefore: r > 0,
    },
  }], 'inserting a row');
}

function deleteRow() {
  const r = state.sel.r;
  return edit([{
    deleteDimension: { range: { sheetId: state.sheet, dimension: 'ROWS', startIndex: r, endIndex: r + 1 } },
  }], 'deleting row ' + (r + 1));
}

// ---- rendering ----------------------------------------------------------------------

/** Who the edits are made as: the address picked, else the owner. */
function who() {
  const owner = state.view && state.view.spreadsheet ? state.view.spreadsheet.owner : null;
  return state.person !== null ? state.person : owner || 'the owner';
}

/** The identity picker: the owner and a few people to choose from; any address may be typed. */
function renderPeople() {
  const owner = state.view.spreadsheet ? state.view.spreadsheet.owner : null;
  const list = $('people');
  const wanted = [owner].concat(PEOPLE).filter((p, i, all) => p && all.indexOf(p) === i);
  if (list.dataset.drawn !== wanted.join(',')) {
    list.dataset.drawn = wanted.join(',');
    list.textContent = '';
    for (const p of wanted) {
      const o = document.createElement('option');
      o.value = p;
      o.label = p === owner ? 'owner' : 'person';
      list.appendChild(o);
    }
  }
  const input = $('person');
  if (document.activeElement !== input) input.value = who();
}

function setPerson(value) {
  const owner = state.view && state.view.spreadsheet ? state.view.spreadsheet.owner : null;
  const picked = value.trim();
  state.person = picked === '' || picked === owner ? null : picked;
  const url = new URL(location.href);
  if (state.person === null) url.searchParams.delete('as');
  else url.searchParams.set('as', state.person);
  history.replaceState(null, '', url);
  $('person').value = who();
  // The protected blocks marked are the new person's.
  state.drawn = null;
  refresh();
}

/** The spreadsheet picker, shown when the emulator holds more than one. */
function renderPicker() {
  const list = state.view.spreadsheets || [];
  const picker = $('spreadsheet');
  picker.hidden = list.length < 2;
  $('title').hidden = !picker.hidden;
  // Spreadsheets seeded alike share a title: their id tells them apart.
  const titles = list.map((s) => s.title || s.id);
  const name = (s, i) => (titles.indexOf(titles[i]) !== titles.lastIndexOf(titles[i]) ? titles[i] + ' · ' + s.id : titles[i]);
  const known = Array.from(picker.options).map((o) => o.value + '\u0000' + o.textContent).join('\u0001');
  const wanted = list.map((s, i) => s.id + '\u0000' + name(s, i)).join('\u0001');
  if (known !== wanted) {
    picker.textContent = '';
    list.forEach((s, i) => {
      const o = document.createElement('option');
      o.value = s.id;
      o.textContent = name(s, i);
      o.title = s.id;
      picker.appendChild(o);
    });
  }
  if (state.spreadsheet !== null) picker.value = state.spreadsheet;
}

function showSpreadsheet(id) {
  state.spreadsheet = id;
  state.sheet = null;
  state.sel = null;
  state.drawn = null;
  remember(id);
  updateToolbar();
  refresh();
}

/** The address names the spreadsheet shown, so a reload keeps it. */
function remember(id) {
  const url = new URL(location.href);
  if (id === null) url.searchParams.delete('spreadsheet');
  else url.searchParams.set('spreadsheet', id);
  history.replaceState(null, '', url);
}

function renderTabs() {
  const nav = $('tabs');
  // Rebuild only when the tabs changed: a rebuild on every poll would swap the buttons
  // under a pointer (or a test) that is about to use them.
  const tabs = state.view.tabs || [];
  const drawn = JSON.stringify([state.sheet, tabs.map((t) => [t.id, t.title, !!t.hidden])]);
  renderTitle();
  if (nav.dataset.drawn === drawn) return;
  nav.dataset.drawn = drawn;
  nav.textContent = '';
  for (const t of tabs) {
    const b = document.createElement('button');
    b.textContent = t.hidden ? t.title + ' (hidden)' : t.title;
    b.dataset.id = String(t.id);
    b.className = 'tab' + (t.id === state.sheet ? ' active' : '') + (t.hidden ? ' hidden' : '');
    b.setAttribute('role', 'tab');
    b.setAttribute('aria-selected', t.id === state.sheet ? 'true' : 'false');
    b.title = t.hidden ? 'a hidden sheet: people do not see it in Sheets' : t.title;
    b.addEventListener('click', () => showSheet(t.id));
    nav.appendChild(b);
  }
}

function renderTitle() {
  const ss = state.view.spreadsheet || {};
  $('title').textContent = ss.title || 'local spreadsheet';
  $('zone').textContent = ss.timeZone ? 'time zone ' + ss.timeZone : '';
}

function showSheet(id) {
  state.sheet = id;
  state.sel = null;
  updateToolbar();
  refresh();
}

function renderSheet() {
  const s = state.view.sheet;
  const table = $('grid');
  table.textContent = '';
  if (!s) return;
  const height = s.rows.length;
  const width = s.rows.reduce((w, r) => Math.max(w, r.length), 0);
  const cols = Math.min(s.columnCount, Math.max(width + 1, 8));
  const rows = s.truncated ? height : Math.min(s.rowCount, Math.max(height + 20, 30));
  const hidden = new Set(s.hiddenColumns || []);
  // Blocks the person editing may not change: [r0, r1, c0, c1], null for an open end.
  const locked = (r, c) => (s.locked || []).some(([r0, r1, c0, c1]) =>
    r >= r0 && (r1 === null || r < r1) && c >= c0 && (c1 === null || c < c1));
  // The columns drawn: a hidden one only when the person asked to see them.
  const shown = [];
  for (let c = 0; c < cols; c++) if (state.showHidden || !hidden.has(c)) shown.push(c);
  const head = table.createTHead().insertRow();
  const corner = document.createElement('th');
  corner.className = 'rownum';
  head.appendChild(corner);
  for (const c of shown) {
    const th = document.createElement('th');
    th.textContent = letters(c);
    if (hidden.has(c)) {
      th.className = 'hiddencol';
      th.title = 'column ' + letters(c) + ' is hidden in Sheets';
    }
    head.appendChild(th);
  }
  const body = table.createTBody();
  for (let r = 0; r < rows; r++) {
    const tr = body.insertRow();
    tr.dataset.r = String(r);
    if (r < s.frozenRows) {
      tr.classList.add('frozen');
      if (r === s.frozenRows - 1) tr.classList.add('last-frozen');
    }
    const num = document.createElement('th');
    num.className = 'rownum';
    num.textContent = String(r + 1);
    tr.appendChild(num);
    const data = s.rows[r] || [];
    for (const c of shown) {
      const td = tr.insertCell();
      td.dataset.r = String(r);
      td.dataset.c = String(c);
      const cell = data[c];
      if (hidden.has(c)) td.classList.add('hiddencol');
      if (cell && cell.b !== undefined) {
        td.classList.add('box');
        const box = document.createElement('input');
        box.type = 'checkbox';
        box.checked = cell.b;
        box.setAttribute('aria-label', letters(c) + (r + 1));
        box.addEventListener('click', (e) => {
          e.preventDefault();
          select(r, c);
          setBox(r, c, !cell.b);
        });
        td.appendChild(box);
      } else if (cell && cell.o !== undefined) {
        // A dropdown (a list or range rule): picking a choice types it in, as in Sheets.
        td.classList.add('dropdown');
        const pick = document.createElement('select');
        pick.setAttribute('aria-label', letters(c) + (r + 1));
        const choices = cell.o.includes(cell.t) ? cell.o : [cell.t].concat(cell.o);
        for (const choice of choices) {
          const option = document.createElement('option');
          option.value = choice;
          option.textContent = choice;
          option.selected = choice === cell.t;
          pick.appendChild(option);
        }
        pick.addEventListener('change', () => {
          select(r, c);
          typeIn(r, c, pick.value);
        });
        td.appendChild(pick);
      } else if (cell && cell.g !== undefined) {
        // An index link (`=HYPERLINK("#gid=…")`): opens that sheet's tab, as in Sheets.
        const a = document.createElement('a');
        a.href = '#gid=' + cell.g;
        a.className = 'text link';
        a.textContent = cell.t;
        a.addEventListener('click', (e) => {
          e.preventDefault();
          showSheet(cell.g);
        });
        td.appendChild(a);
      } else if (cell && cell.u !== undefined) {
        // A link to a web page (結果's HYPERLINK): opens it in a new tab, as Sheets does.
        const a = document.createElement('a');
        a.href = cell.u;
        a.target = '_blank';
        a.rel = 'noopener noreferrer';
        a.className = 'text link';
        a.textContent = cell.t;
        a.title = cell.u;
        td.appendChild(a);
      } else if (cell) {
        const text = document.createElement('div');
        text.className = 'text';
        text.textContent = cell.t;
        td.appendChild(text);
        td.title = cell.t;
        if (cell.n) td.classList.add('num');
      }
      if (locked(r, c)) {
        td.classList.add('locked');
        td.title = 'protected: ' + who() + ' may not edit this cell';
      }
      if (state.sel && state.sel.r === r && state.sel.c === c) td.classList.add('selected');
      td.addEventListener('click', () => select(r, c));
      td.addEventListener('dblclick', (e) => {
        if (state.editing || e.target.closest('input')) return;
        startEdit(td, r, c, cell);
      });
    }
    if (r < s.frozenRows) {
      for (const el of tr.children) el.style.top = ROW_H * (r + 1) + 'px';
    }
  }
  $('truncated').hidden = !s.truncated;
}

function select(r, c) {
  state.sel = { r, c };
  for (const el of document.querySelectorAll('#grid td.selected')) el.classList.remove('selected');
  const td = document.querySelector(`#grid td[data-r="${r}"][data-c="${c}"]`);
  if (td) td.classList.add('selected');
  updateToolbar();
}

function updateToolbar() {
  const on = state.sel !== null && state.view && state.view.sheet;
  for (const id of ['sort-asc', 'sort-desc', 'insert-row', 'delete-row']) $(id).disabled = !on;
  $('where').textContent = on ? letters(state.sel.c) + (state.sel.r + 1) : 'select a cell';
}

function startEdit(td, r, c, cell) {
  if (cell && cell.b !== undefined) return;
  state.editing = true;
  const input = document.createElement('input');
  input.className = 'edit';
  // What Sheets' editor shows: a formula's text, else the displayed value.
  const before = cell ? (cell.e !== undefined ? cell.e : cell.t) : '';
  input.value = before;
  input.setAttribute('aria-label', 'edit ' + letters(c) + (r + 1));
  td.textContent = '';
  td.appendChild(input);
  input.focus();
  let done = false;
  const finish = (commit) => {
    if (done) return;
    done = true;
    state.editing = false;
    state.drawn = null;
    // Leaving the editor unchanged writes nothing: the cell keeps its value and format.
    if (commit && input.value !== before) typeIn(r, c, input.value);
    else renderSheet();
  };
  input.addEventListener('keydown', (e) => {
    // Enter that confirms an IME conversion is not the end of the edit.
    if (e.isComposing || e.keyCode === 229) return;
    if (e.key === 'Enter') finish(true);
    if (e.key === 'Escape') finish(false);
  });
  input.addEventListener('blur', () => finish(true));
}

/** Keyboard: arrows move the selection, Enter or F2 edits, Space ticks a checkbox. */
document.addEventListener('keydown', (e) => {
  if (state.editing || !state.sel || !state.view || !state.view.sheet) return;
  if (e.target.closest && e.target.closest('input, button')) return;
  const { r, c } = state.sel;
  const moves = { ArrowUp: [-1, 0], ArrowDown: [1, 0], ArrowLeft: [0, -1], ArrowRight: [0, 1] };
  if (moves[e.key]) {
    e.preventDefault();
    // Left and right step over the columns not drawn.
    const drawn = Array.from(document.querySelectorAll('#grid tbody tr:first-child td')).map((td) => Number(td.dataset.c));
    const i = drawn.indexOf(c);
    const next = moves[e.key][1] === 0 || i < 0 ? c : drawn[Math.min(drawn.length - 1, Math.max(0, i + moves[e.key][1]))];
    select(Math.max(0, r + moves[e.key][0]), next);
    const td = document.querySelector('#grid td.selected');
    if (td) td.scrollIntoView({ block: 'nearest', inline: 'nearest' });
    return;
  }
  const cell = (state.view.sheet.rows[r] || [])[c];
  const td = document.querySelector(`#grid td[data-r="${r}"][data-c="${c}"]`);
  if ((e.key === 'Enter' || e.key === 'F2') && td) {
    e.preventDefault();
    startEdit(td, r, c, cell);
  } else if (e.key === ' ' && cell && cell.b !== undefined) {
    e.preventDefault();
    setBox(r, c, !cell.b);
  }
});

function renderSide() {
  const v = state.view;
  const rates = $('rates');
  rates.textContent = '';
  const q = v.quota;
  if (!q) {
    rates.textContent = 'quota off';
  }
  for (const r of v.rates || []) {
    const div = document.createElement('div');
    div.className = 'rate';
    const who = document.createElement('div');
    who.className = 'who';
    who.textContent = r.user;
    div.appendChild(who);
    for (const [kind, n, limit] of [['reads', r.reads, q && q.perUser.read], ['writes', r.writes, q && q.perUser.write]]) {
      const line = document.createElement('div');
      line.textContent = kind + ': ' + n + (limit ? ' / ' + limit + ' a minute' : ' a minute') + ' (refused ones included)';
      div.appendChild(line);
      if (limit) {
        const bar = document.createElement('div');
        bar.className = 'bar' + (n >= limit ? ' over' : '');
        const fill = document.createElement('span');
        fill.style.width = Math.min(100, (100 * n) / limit) + '%';
        bar.appendChild(fill);
        div.appendChild(bar);
      }
    }
    rates.appendChild(div);
  }
  if (q && (v.rates || []).length === 0) rates.textContent = 'no requests in the last minute';
  if (q) {
    const p = document.createElement('div');
    p.className = 'project';
    p.textContent = 'project: ' + q.perProject.read + ' reads and ' + q.perProject.write + ' writes a minute, all accounts together';
    rates.appendChild(p);
  }
  const log = $('log');
  log.textContent = '';
  for (const e of v.log || []) {
    const li = document.createElement('li');
    const t = document.createElement('time');
    t.textContent = e.at;
    li.appendChild(t);
    const what = document.createElement('span');
    const who = e.user ? e.user.split('@')[0] : 'anonymous';
    what.textContent = who + ' · ' + e.method.replace(/^spreadsheets\./, '') +
      (e.status !== 200 ? ' → ' + (e.status || 'dropped') : '') +
      (e.ranges && e.ranges.length ? ' · ' + e.ranges.slice(0, 2).join(', ') + (e.ranges.length > 2 ? ' …' : '') : '');
    if (e.method === 'person.edit') what.className = 'person';
    else if (e.status >= 400 || e.status === 0) what.className = 'err';
    li.appendChild(what);
    log.appendChild(li);
  }
}

$('show-hidden').addEventListener('change', (e) => {
  state.showHidden = e.target.checked;
  state.drawn = null;
  renderSheet();
});
$('quiet').addEventListener('change', (e) => {
  state.quiet = e.target.checked;
  refresh();
});
$('spreadsheet').addEventListener('change', (e) => showSpreadsheet(e.target.value));
$('person').addEventListener('change', (e) => setPerson(e.target.value));
$('sort-asc').addEventListener('click', () => sortBy('ASCENDING'));
$('sort-desc').addEventListener('click', () => sortBy('DESCENDING'));
$('insert-row').addEventListener('click', insertRow);
$('delete-row').addEventListener('click', deleteRow);
loop();

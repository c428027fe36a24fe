// A sortable, filterable, paged table of report cells (strings, numbers, `null`).
// Numbers sort as numbers and are shown with one number of decimals per column;
// text sorts lexically. The columns that answer the table's question (the report's
// `key_columns`) come first; a text column equal to an earlier one in every row is
// left out with a line saying so (the CSV export keeps every column in report order).

import { h, clear } from '../lib/dom.js';
import { cellIsNumber, cellText, cellValue, columnDecimals } from '../lib/format.js';

const PAGE_SIZES = [25, 50, 100, 500];

/** A column header as a lowercase identifier, as the server's `sort=` accepts it. */
export function slug(name) {
  return String(name).toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '');
}

/** Compares two cells: numbers numerically and before text, text lexically. */
export function compareCells(a, b) {
  const an = cellIsNumber(a);
  const bn = cellIsNumber(b);
  if (an && bn) return cellValue(a) - cellValue(b);
  if (an) return -1;
  if (bn) return 1;
  return String(cellValue(a)).localeCompare(String(cellValue(b)));
}

/**
 * Renders a table.
 * - `columns`, `rows`: headers and rows of cells.
 * - `caption`: accessible name.
 * - `sort`: initial `{column, descending}` (by index) or `null` for the given order.
 * - `filter`: initial filter text.
 * - `keep(row)`: rows for which it returns false are hidden (e.g. IDLE excluded).
 * - `onChange({sort, filter})`: called after the user sorts or filters.
 * - `toolbar`: extra nodes for the toolbar (e.g. the Export CSV link).
 * - `lead`: names of the columns to show first, in that order (the report's `key_columns`).
 * Sorting and the URL name columns by their report index, whatever the shown order.
 * Returns `{element, visibleRows(), sortSpec(), setKeep(fn)}`.
 */
export function dataTable({ columns, rows, caption, sort = null, filter = '', keep = null, onChange = null, toolbar = [], pageSize = 100, id = null, lead = [] }) {
  const decimals = columns.map((_, i) => columnDecimals(rows.map((row) => row[i])));
  const numeric = columns.map((_, i) => rows.some((row) => cellIsNumber(row[i])) && rows.every((row) => cellIsNumber(row[i]) || row[i] === null || row[i] === '—' || row[i] === ''));
  const state = { sort, filter, keep, page: 0, pageSize };
  const { shown: order, repeated } = displayOrder(columns, rows, lead || [], numeric);

  const input = h('input', {
    type: 'search', class: 'filter', placeholder: 'Filter rows', 'aria-label': `Filter ${caption || 'rows'}`, value: filter,
    onInput: () => { state.filter = input.value; state.page = 0; update(); notify(); },
  });
  const count = h('span', { class: 'row-count', 'aria-live': 'polite' });
  const head = h('thead');
  const body = h('tbody');
  const pager = h('div', { class: 'pager' });
  const table = h('table', { class: 'data', dataset: { columns: JSON.stringify(columns), repeated: JSON.stringify(repeated) } },
    caption ? h('caption', { class: 'visually-hidden' }, caption) : null, head, body);
  const repeatedNote = repeated.length
    ? h('p', { class: 'table-note' }, repeated.map(([hidden, twin]) => `${columns[hidden]} is not shown: it equals ${columns[twin]} in every row.`).join(' '))
    : null;
  const element = h('div', { class: 'data-table', id },
    h('div', { class: 'table-toolbar' }, input, count, h('span', { class: 'spacer' }), toolbar),
    repeatedNote,
    h('div', { class: 'table-scroll' }, table),
    pager);

  function notify() {
    if (onChange) onChange({ sort: state.sort, filter: state.filter });
  }

  function visibleRows() {
    const needle = state.filter.trim().toLowerCase();
    let out = rows.filter((row) => (!state.keep || state.keep(row))
      && (!needle || row.some((cell, i) => cellText(cell, decimals[i]).toLowerCase().includes(needle))));
    if (state.sort && state.sort.column < columns.length) {
      const { column, descending } = state.sort;
      out = out.map((row, i) => [row, i]).sort(([a, i], [b, j]) => {
        const order = compareCells(a[column], b[column]);
        return (descending ? -order : order) || i - j;
      }).map(([row]) => row);
    }
    return out;
  }

  function renderHead() {
    clear(head);
    head.append(h('tr', {}, order.map((i) => {
      const name = columns[i];
      const active = state.sort && state.sort.column === i;
      const ariaSort = active ? (state.sort.descending ? 'descending' : 'ascending') : 'none';
      return h('th', { scope: 'col', 'aria-sort': ariaSort, class: numeric[i] ? 'num' : null, dataset: { column: String(i) } },
        h('button', { type: 'button', class: 'sort', title: `Sort by ${name}`, onClick: () => sortBy(i) },
          headerText(name), h('span', { class: 'sort-mark', 'aria-hidden': 'true' }, active ? (state.sort.descending ? '▼' : '▲') : '')));
    })));
  }

  function sortBy(column) {
    const same = state.sort && state.sort.column === column;
    state.sort = { column, descending: same ? !state.sort.descending : numeric[column] };
    state.page = 0;
    update();
    notify();
  }

  function update() {
    renderHead();
    const visible = visibleRows();
    const pages = Math.max(1, Math.ceil(visible.length / state.pageSize));
    state.page = Math.min(state.page, pages - 1);
    const first = state.page * state.pageSize;
    const shown = visible.slice(first, first + state.pageSize);
    clear(body);
    if (shown.length === 0) {
      body.append(h('tr', { class: 'empty' }, h('td', { colspan: order.length }, rows.length ? 'No row matches the filter.' : 'No rows.')));
    }
    for (const row of shown) {
      body.append(h('tr', {}, order.map((i) => {
        const cell = row[i];
        const text = cellText(cell, decimals[i]);
        return cellIsNumber(cell)
          ? h('td', { class: 'num', 'data-value': cellValue(cell) }, text)
          : h('td', { class: numeric[i] ? 'num' : null, title: text.length > 60 ? text : null }, text);
      })));
    }
    count.textContent = visible.length === rows.length ? plural(rows.length, 'row') : `${visible.length} of ${plural(rows.length, 'row')}`;
    renderPager(visible.length, pages, first, shown.length);
  }

  function renderPager(total, pages, first, shownCount) {
    clear(pager);
    if (total <= PAGE_SIZES[0]) return;
    const size = h('select', { 'aria-label': 'Rows per page', onChange: () => { state.pageSize = Number(size.value); state.page = 0; update(); } },
      PAGE_SIZES.map((n) => h('option', { value: n, selected: n === state.pageSize }, `${n} per page`)));
    pager.append(
      size,
      h('span', { class: 'page-range' }, `${first + 1}–${first + shownCount} of ${total}`),
      h('button', { type: 'button', class: 'page-prev', disabled: state.page === 0, 'aria-label': 'Previous page', onClick: () => { state.page -= 1; update(); } }, '‹'),
      h('button', { type: 'button', class: 'page-next', disabled: state.page >= pages - 1, 'aria-label': 'Next page', onClick: () => { state.page += 1; update(); } }, '›'),
    );
  }

  update();
  return {
    element,
    visibleRows,
    sortSpec: () => state.sort,
    setKeep(fn) { state.keep = fn; state.page = 0; update(); },
  };
}

/**
 * The columns to show, in order — `lead` first, then the rest in report order — and the
 * text columns left out as `[column, earlier column]` pairs because they equal that
 * earlier shown column in every row.
 */
function displayOrder(columns, rows, lead, numeric) {
  const first = lead.map((name) => columns.indexOf(name)).filter((i, at, all) => i >= 0 && all.indexOf(i) === at);
  const ordered = [...first, ...columns.map((_, i) => i).filter((i) => !first.includes(i))];
  const shown = [];
  const repeated = [];
  for (const i of ordered) {
    const twin = rows.length > 0 && !numeric[i]
      ? shown.find((j) => !numeric[j] && rows.every((row) => row[i] === row[j]))
      : undefined;
    if (twin === undefined) shown.push(i);
    else repeated.push([i, twin]);
  }
  return { shown, repeated };
}

/** A header as the page shows it: microseconds written `µs` (the CSV keeps XProf's `(us)`). */
function headerText(name) {
  return String(name).replace('(us)', '(µs)').replace(' us)', ' µs)');
}

function plural(count, noun) {
  return `${count} ${noun}${count === 1 ? '' : 's'}`;
}

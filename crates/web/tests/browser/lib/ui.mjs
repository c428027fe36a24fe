// What the UI specs share: opening a tool page and waiting for it, reading tables
// and numbers as shown, the API's answers, CSV parsing, and downloads.

import { readFile } from 'node:fs/promises';

/** The newest run (as the page shows it first) with its exact tool list. */
export async function newestRun(t) {
  const { runs } = await t.api('api/runs');
  t.assert.ok(runs.length > 0, 'the server lists at least one run');
  const run = runs[0];
  return run.tools_exact === false ? t.api(`api/run?run=${encodeURIComponent(run.name)}`) : run;
}

/** Waits until the page has rendered its current view (`#page[aria-busy=false]`). */
export async function ready(page) {
  await page.waitForSelector('#page[aria-busy="false"]', { timeout: 60_000 });
}

/** Opens `?params` (an object) and waits for the page. */
export async function open(t, params, page = t.page) {
  const query = new URLSearchParams(params).toString();
  await page.goto(`${t.baseUrl}${query ? `?${query}` : ''}`);
  await ready(page);
  const error = await page.locator('.card.error').count();
  t.assert.equal(error, 0, `the page shows no error: ${error ? await page.locator('.card.error').innerText() : ''}`);
}

/** The `/api/tool` answer for `tool` on all hosts of `run`, with `options` (`{breakdown}`, `{gap_threshold}`). */
export function toolAnswer(t, run, tool, host = 'all', options = {}) {
  return t.api(`api/tool?${new URLSearchParams({ run: run.name, host, tool, ...options })}`);
}

/** The `/api/tool` requests `page` makes from now on, as URLSearchParams (the array fills as they go). */
export function watchToolRequests(page) {
  const seen = [];
  page.on('request', (request) => {
    const url = new URL(request.url());
    if (url.pathname === '/api/tool') seen.push(url.searchParams);
  });
  return seen;
}

/** The report's main section (the one with the CSV table), or `undefined`. */
export function mainSection(report) {
  return report.sections.find((section) => section.main && section.table);
}

/**
 * The table under `root` (a locator) in the report's column order — `headers` and the
 * visible rows' cell texts, a column the page leaves out as a repeat read from its twin —
 * and `shownHeaders`, the headers in the order the page shows them.
 */
export async function readTable(root) {
  return root.locator('table.data').first().evaluate((table) => {
    const columns = JSON.parse(table.dataset.columns);
    const repeated = JSON.parse(table.dataset.repeated || '[]');
    const heads = [...table.querySelectorAll('thead th')];
    const shown = heads.map((th) => Number(th.dataset.column));
    const rows = [...table.querySelectorAll('tbody tr:not(.empty)')].map((tr) => {
      const cells = new Array(columns.length).fill('');
      [...tr.cells].forEach((td, k) => { cells[shown[k]] = td.textContent; });
      for (const [hidden, twin] of repeated) cells[hidden] = cells[twin];
      return cells;
    });
    return { headers: columns, shownHeaders: shown.map((i) => columns[i]), rows };
  });
}

/** The number a person reads in `text` (`1,234.5 ms` → 1234.5) and how many decimals it shows. */
export function shownNumber(text) {
  const match = /-?[\d,]*\.?\d+/.exec(String(text));
  if (!match) return { value: NaN, decimals: 0 };
  const digits = match[0].replaceAll(',', '');
  const point = digits.indexOf('.');
  return { value: Number(digits), decimals: point < 0 ? 0 : digits.length - point - 1 };
}

/** Asserts that `text` shows `value` to the precision it is shown with. */
export function assertShows(assert, text, value, what) {
  const shown = shownNumber(text);
  const tolerance = 0.5 * 10 ** -shown.decimals + 1e-9 * Math.abs(value);
  assert.ok(Math.abs(shown.value - value) <= tolerance, `${what}: the page shows ${JSON.stringify(text)}, the API says ${value}`);
}

/** Milliseconds in one of each duration unit the UI writes (lib/format.js). */
const MS_PER_UNIT = { s: 1e3, ms: 1, µs: 1e-3, ns: 1e-6, ps: 1e-9 };

/** Asserts that `text`, a duration such as `64.7 ms` or `894 µs`, shows `ms` milliseconds to the precision it is shown with. */
export function assertShowsMs(assert, text, ms, what) {
  const shown = shownNumber(text);
  const unit = String(text).trim().split(/\s+/).pop();
  const scale = shown.value === 0 ? 1 : MS_PER_UNIT[unit];
  assert.ok(scale !== undefined, `${what}: ${JSON.stringify(text)} has no duration unit`);
  const tolerance = (0.5 * 10 ** -shown.decimals + 1e-9 * Math.abs(ms / scale)) * scale;
  assert.ok(Math.abs(shown.value * scale - ms) <= tolerance, `${what}: the page shows ${JSON.stringify(text)}, the API says ${ms} ms`);
}

/**
 * Asserts that shown table rows equal the API's rows: text cells exactly, number
 * cells to their shown precision (`null` cells as a dash).
 */
export function assertRowsMatch(assert, shownRows, apiRows, what) {
  assert.equal(shownRows.length, apiRows.length, `${what}: row count`);
  shownRows.forEach((row, i) => {
    assert.equal(row.length, apiRows[i].length, `${what}: row ${i} length`);
    row.forEach((text, j) => {
      const cell = apiRows[i][j];
      if (typeof cell === 'number') assertShows(assert, text, cell, `${what} row ${i} column ${j}`);
      else if (cell === null) assert.equal(text, '—', `${what} row ${i} column ${j}`);
      else assert.equal(text, cell, `${what} row ${i} column ${j}`);
    });
  });
}

/** Parses CSV (RFC 4180: quoted fields, doubled quotes, CRLF or LF) into rows of strings. */
export function parseCsv(text) {
  const rows = [];
  let row = [];
  let field = '';
  let quoted = false;
  for (let i = 0; i < text.length; i += 1) {
    const c = text[i];
    if (quoted) {
      if (c === '"' && text[i + 1] === '"') { field += '"'; i += 1; } else if (c === '"') quoted = false;
      else field += c;
    } else if (c === '"') quoted = true;
    else if (c === ',') { row.push(field); field = ''; } else if (c === '\n' || c === '\r') {
      if (c === '\r' && text[i + 1] === '\n') i += 1;
      row.push(field); rows.push(row); row = []; field = '';
    } else field += c;
  }
  if (field !== '' || row.length) { row.push(field); rows.push(row); }
  return rows;
}

/** Clicks `locator` and returns the downloaded file's name and text. */
export async function download(page, locator) {
  const [file] = await Promise.all([page.waitForEvent('download'), locator.click()]);
  const path = await file.path();
  return { name: file.suggestedFilename(), text: await readFile(path, 'utf8') };
}

/** The numbers (`data-value`) of report column `index` among the visible rows of the table under `root`. */
export async function columnValues(root, index) {
  return root.locator('table.data').first().evaluate((table, column) => {
    const at = [...table.querySelectorAll('thead th')].findIndex((th) => Number(th.dataset.column) === column);
    return [...table.querySelectorAll('tbody tr:not(.empty)')]
      .map((tr) => tr.cells[at]).map((td) => (td && td.dataset.value !== undefined ? Number(td.dataset.value) : null));
  }, index);
}

/** The header cell of report column `index` of the table under `root`, wherever the page shows it. */
export function headerOf(root, index) {
  return root.locator(`table.data thead th[data-column="${index}"]`).first();
}

/** Whether `values` never increase (`descending`) or never decrease. */
export function isSorted(values, descending) {
  return values.every((v, i) => i === 0 || (descending ? values[i - 1] >= v : values[i - 1] <= v));
}

/**
 * Focuses the chart mark `locator` (as a keyboard user does; hovering shows the
 * same details) and returns the tooltip's text.
 */
export async function tooltipOf(page, locator) {
  await locator.focus();
  const tip = page.locator('.chart-tooltip');
  await tip.waitFor({ state: 'visible' });
  return tip.innerText();
}

/** A report section's title as the card id the page gives it (`section-…`). */
export function sectionId(title) {
  return `section-${String(title).toLowerCase().replace(/[^a-z0-9]+/g, '_').replace(/^_+|_+$/g, '')}`;
}

/** The value of the tooltip row labelled `label` (the tooltip must be showing). */
export async function tooltipValue(page, label) {
  return page.locator('.chart-tooltip .tip-row').filter({ has: page.locator('.tip-label', { hasText: label }) }).first().locator('.tip-value').innerText();
}

/**
 * Opens `tool`'s page on all hosts of the newest run and returns that run and the
 * tool's API answer; skips the spec when the run does not list the tool.
 */
export async function openToolPage(t, tool) {
  const run = await newestRun(t);
  if (!run.tools.includes(tool)) t.skip(`the run does not list ${tool}`);
  const answer = await toolAnswer(t, run, tool);
  await open(t, { run: run.name, tool });
  return { run, ...answer };
}

/** Asserts that every report section with a table shows the report's rows (its first page). */
export async function assertSectionTables(t, report) {
  for (const section of report.sections.filter((s) => s.table)) {
    const shown = await readTable(t.page.locator(`#${sectionId(section.title)}`));
    assertRowsMatch(t.assert, shown.rows, section.table.rows.slice(0, section.main ? 100 : 25), section.title);
  }
}

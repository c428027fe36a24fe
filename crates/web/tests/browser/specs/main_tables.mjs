// Every tool page of the newest run: renders without error; its main table shows
// the report's main table (headers and cells, numbers to the shown precision);
// sorting by a number column orders the rows and lands in the URL; the filter keeps
// exactly the matching rows; Export CSV downloads the whole table (every row,
// whatever the filter, as the TF Profiler's Export as CSV does) in the sort shown;
// a reload restores sort and filter from the URL.

import { assertRowsMatch, columnValues, download, headerOf, isSorted, mainSection, newestRun, open, parseCsv, readTable, ready, shownNumber, toolAnswer } from '../lib/ui.mjs';

export default async function (t) {
  const { page, assert } = t;
  const run = await newestRun(t);
  for (const tool of run.tools.filter((name) => name !== 'trace_viewer')) {
    await open(t, { run: run.name, tool });
    await t.screenshot(tool);
    const { report } = await toolAnswer(t, run, tool);
    const main = mainSection(report);
    if (!main) continue;
    const root = page.locator('#main-table');
    if (tool === 'framework_op_stats') {
      // The report's table holds the IDLE rows; the page hides them until asked.
      await page.locator('#idle-toggle button', { hasText: 'Yes' }).click();
    }
    const shown = await readTable(root);
    assert.deepEqual(shown.headers, main.table.columns, `${tool}: main table headers`);
    const lead = (main.table.key_columns || []).filter((name) => shown.shownHeaders.includes(name));
    assert.deepEqual(shown.shownHeaders.slice(0, lead.length), lead, `${tool}: the columns that answer come first`);
    assertRowsMatch(assert, shown.rows, main.table.rows.slice(0, shown.rows.length), `${tool} main table`);
    assert.equal(shown.rows.length, Math.min(100, main.table.rows.length), `${tool}: first page of rows`);
    if (main.table.rows.length < 2) continue;

    // Sort by the first number column whose values differ.
    const column = main.table.columns.findIndex((_, i) => main.table.rows.every((row) => typeof row[i] === 'number')
      && new Set(main.table.rows.map((row) => row[i])).size > 1);
    if (column >= 0) {
      const header = headerOf(root, column);
      await header.locator('button').click();
      assert.equal(await header.getAttribute('aria-sort'), 'descending', `${tool}: first click sorts numbers descending`);
      assert.ok(isSorted(await columnValues(root, column), true), `${tool}: rows descending by ${main.table.columns[column]}`);
      await header.locator('button').click();
      assert.equal(await header.getAttribute('aria-sort'), 'ascending', `${tool}: second click sorts ascending`);
      const ascending = await columnValues(root, column);
      assert.ok(isSorted(ascending, false), `${tool}: rows ascending by ${main.table.columns[column]}`);
      assert.equal(ascending[0], Math.min(...main.table.rows.map((row) => row[column])), `${tool}: smallest value first`);
      assert.match(new URL(page.url()).searchParams.get('sort') || '', /:asc$/, `${tool}: the sort is in the URL`);
    }

    // Filter by the text of a cell that holds letters.
    const textColumn = main.table.columns.findIndex((_, i) => main.table.rows.some((row) => typeof row[i] === 'string' && /[a-z]/i.test(row[i])));
    let needle = null;
    if (textColumn >= 0) {
      const values = main.table.rows.map((row) => row[textColumn]).filter((v) => typeof v === 'string' && /[a-z]/i.test(v));
      needle = values[values.length - 1].slice(0, 12);
      const expected = main.table.rows.filter((row) => row.some((cell) => typeof cell === 'string' && cell.toLowerCase().includes(needle.toLowerCase()))).length;
      await root.locator('input.filter').fill(needle);
      const filtered = await readTable(root);
      assert.equal(filtered.rows.length, Math.min(100, expected), `${tool}: rows matching ${JSON.stringify(needle)}`);
      assert.ok(filtered.rows.every((row) => row.some((text) => text.toLowerCase().includes(needle.toLowerCase()))), `${tool}: every shown row matches the filter`);
      const count = await root.locator('.row-count').innerText();
      assert.equal(shownNumber(count).value, expected, `${tool}: the row count says ${count}`);
      assert.equal(new URL(page.url()).searchParams.get('filter'), needle, `${tool}: the filter is in the URL`);
    }

    // Export CSV: the whole table, in the sort shown.
    const csv = await download(page, root.locator('a.export-csv'));
    assert.equal(csv.name, `${tool}.csv`, `${tool}: CSV file name`);
    const [headers, ...rows] = parseCsv(csv.text.trimEnd());
    assert.deepEqual(headers, main.table.columns, `${tool}: CSV headers`);
    assert.equal(rows.length, main.table.rows.length, `${tool}: the CSV holds every row of the table, not only the filtered ones`);
    if (column >= 0) {
      const values = rows.map((row) => Number(row[column]));
      assert.ok(isSorted(values, false), `${tool}: the CSV is in the order shown (ascending ${main.table.columns[column]})`);
    }

    // A reload shows the same view.
    await page.reload();
    await ready(page);
    if (column >= 0) {
      assert.equal(await headerOf(root, column).getAttribute('aria-sort'), 'ascending', `${tool}: the sort survives a reload`);
    }
    if (needle !== null) assert.equal(await root.locator('input.filter').inputValue(), needle, `${tool}: the filter survives a reload`);
  }
}

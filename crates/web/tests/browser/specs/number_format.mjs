// The UI writes numbers for people by mlprof's one rule: every case of
// crates/model/src/human_cases.json (which the CLI's crates/model/src/human.rs is
// checked against too) must read the same through lib/format.js, imported from the
// server into the page.

import { readFile } from 'node:fs/promises';

const CASES = new URL('../../../../model/src/human_cases.json', import.meta.url);

/** Runs the checks; `t` is the harness context (see ../run.mjs). */
export default async function numberFormat(t) {
  const { page, assert } = t;
  const cases = JSON.parse(await readFile(CASES, 'utf8'));
  await page.goto(new URL('static/favicon.svg', t.baseUrl).href);
  const results = await page.evaluate(runInPage, cases);
  assert.ok(results.length > 40, `only ${results.length} cases`);
  for (const [name, actual, expected] of results) assert.equal(actual, expected, name);
}

/** Runs in the page: returns [name, actual, expected] for every case. */
async function runInPage(cases) {
  const format = await import('/static/lib/format.js');
  const functions = {
    duration_ps: (row) => format.formatDuration(row[0]),
    bytes: (row) => format.formatBytes(row[0]),
    rate: (row) => format.formatRate(row[0], row[1]),
    count: (row) => format.formatCount(row[0]),
    percent: (row) => format.formatPercent(row[0]),
  };
  const results = [];
  for (const [name, rows] of Object.entries(cases)) {
    if (name.startsWith('//')) continue;
    const run = functions[name];
    if (!run) throw new Error(`human_cases.json names ${name}, which lib/format.js does not have`);
    for (const row of rows) results.push([`${name}(${JSON.stringify(row.slice(0, -1))})`, run(row), row[row.length - 1]]);
  }
  return results;
}

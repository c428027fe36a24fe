// Framework op stats: without IDLE by default (as the TF Profiler), the table
// equals the API's `without_idle` rows; "Include IDLE" shows the `with_idle` rows
// and keeps the choice in the URL; the four pies (host/device × op/op type) show
// the self time of the rows in the table.

import { assertRowsMatch, openToolPage, readTable, ready, tooltipOf } from '../lib/ui.mjs';

const round = (value, decimals) => Number(value.toFixed(decimals));

/** A result row as the table shows it (the report's columns and rounding). */
function expectedRow(row) {
  const device = row.host_or_device === 'Device';
  const share = device ? row.device_self_time_fraction : row.host_self_time_fraction;
  const cumulative = device ? row.device_cumulative_self_time_fraction : row.host_cumulative_self_time_fraction;
  return [row.rank, row.host_or_device, row.op_type, row.op_name, row.occurrences, round(row.total_time_us, 3), round(row.avg_time_us, 3),
    round(row.total_self_time_us, 3), round(row.avg_self_time_us, 3), round(share * 100, 2), round(cumulative * 100, 2), row.is_eager ? 'yes' : 'no'];
}

export default async function (t) {
  const { page, assert } = t;
  const { result } = await openToolPage(t, 'framework_op_stats');
  const table = page.locator('#main-table');

  let shown = await readTable(table);
  assert.equal(await page.locator('#idle-toggle button[aria-pressed="true"]').innerText(), 'No', 'IDLE is excluded by default');
  assertRowsMatch(assert, shown.rows, result.without_idle.rows.slice(0, 100).map(expectedRow), 'ops without IDLE');
  assert.ok(shown.rows.every((row) => row[2] !== 'IDLE'), 'no IDLE row');

  const pies = page.locator('#op-pies figure');
  assert.equal(await pies.count(), 4, 'four pie charts');
  const hostRows = result.without_idle.rows.filter((row) => row.host_or_device === 'Host' && row.total_self_time_us > 0);
  const hostTypes = new Set(hostRows.map((row) => row.op_type));
  assert.equal(await pies.nth(2).locator('.mark').count(), Math.min(10, hostTypes.size), 'host pie by type: one slice per type (10 at most)');
  if (hostRows.length > 0) {
    const top = [...hostRows].sort((a, b) => b.total_self_time_us - a.total_self_time_us)[0];
    const tip = await tooltipOf(page, pies.nth(3).locator('.mark').first());
    assert.ok(tip.startsWith(top.op_name), `the largest host op slice is ${top.op_name}: ${tip}`);
  }
  await t.screenshot('framework_op_stats-without-idle');

  await page.locator('#idle-toggle button', { hasText: 'Yes' }).click();
  shown = await readTable(table);
  assertRowsMatch(assert, shown.rows, result.with_idle.rows.slice(0, 100).map(expectedRow), 'ops with IDLE');
  assert.ok(shown.rows.some((row) => row[2] === 'IDLE'), 'an IDLE row');
  assert.equal(new URL(page.url()).searchParams.get('idle'), 'include', 'the choice is in the URL');
  await page.reload();
  await ready(page);
  assert.equal(await page.locator('#idle-toggle button[aria-pressed="true"]').innerText(), 'Yes', 'the choice survives a reload');
}

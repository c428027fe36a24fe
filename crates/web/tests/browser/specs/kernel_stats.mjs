// Kernel stats: the kernel table equals the report's, and the pies show the
// kernels' total time by kernel name and by op.

import { assertRowsMatch, mainSection, openToolPage, readTable, tooltipOf } from '../lib/ui.mjs';

export default async function (t) {
  const { page, assert } = t;
  const { result, report } = await openToolPage(t, 'kernel_stats');
  const main = mainSection(report);
  const shown = await readTable(page.locator('#main-table'));
  assertRowsMatch(assert, shown.rows, main.table.rows.slice(0, 100), 'kernels');

  const names = new Set(result.kernels.filter((k) => k.total_duration_ns > 0).map((k) => k.name));
  const pies = page.locator('#kernel-pies figure');
  assert.equal(await pies.nth(0).locator('.mark').count(), Math.min(10, names.size), 'one slice per kernel (10 at most)');
  const byName = new Map();
  for (const kernel of result.kernels) byName.set(kernel.name, (byName.get(kernel.name) || 0) + kernel.total_duration_ns);
  const [longest] = [...byName].sort((a, b) => b[1] - a[1]);
  if (longest) {
    const tip = await tooltipOf(page, pies.nth(0).locator('.mark').first());
    assert.ok(tip.startsWith(longest[0].slice(0, 40)), `the largest slice is the kernel with the most total time: ${tip}`);
  }
  await t.screenshot('kernel_stats-pies');
}

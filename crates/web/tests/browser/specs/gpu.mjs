// HTA's GPU analyses: every section's table equals the report's, the temporal
// breakdown has a column per rank, and the kernel-type pie a slice per type.

import { assertSectionTables, openToolPage, sectionId } from '../lib/ui.mjs';

export default async function (t) {
  const { page, assert } = t;
  const { result, report } = await openToolPage(t, 'gpu');
  await assertSectionTables(t, report);
  const temporal = page.locator(`#${sectionId('Temporal breakdown')} figure .column`);
  assert.equal(await temporal.count(), result.temporal_breakdown.length, 'one column per rank');
  const types = result.kernel_breakdown.kernel_types.filter((type) => type.sum_us > 0);
  const pie = page.locator(`#${sectionId('GPU time by kernel type (all ranks)')} svg.pie .mark`);
  assert.equal(await pie.count(), types.length === 1 ? 0 : Math.min(10, types.length), 'one slice per kernel type (one type is said in words)');
  await t.screenshot('gpu-charts');
}

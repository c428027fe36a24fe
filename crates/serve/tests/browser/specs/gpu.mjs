// HTA's GPU analyses: every section's table equals the report's, the temporal
// breakdown has a column per rank, and the kernel-type pie a slice per type.

import { assertRowsMatch, newestRun, open, readTable, sectionId, toolAnswer } from '../lib/ui.mjs';

export default async function (t) {
  const { page, assert } = t;
  const run = await newestRun(t);
  if (!run.tools.includes('gpu')) t.skip('the run has no GPU kernels in a PyTorch trace');
  const { result, report } = await toolAnswer(t, run, 'gpu');
  await open(t, { run: run.name, tool: 'gpu' });
  for (const section of report.sections.filter((s) => s.table)) {
    const card = page.locator(`#${sectionId(section.title)}`);
    const pageSize = section.main ? 100 : 25;
    assertRowsMatch(assert, (await readTable(card)).rows, section.table.rows.slice(0, pageSize), section.title);
  }
  const temporal = page.locator(`#${sectionId('Temporal breakdown')} figure .column`);
  assert.equal(await temporal.count(), result.temporal_breakdown.length, 'one column per rank');
  const types = result.kernel_breakdown.kernel_types.filter((type) => type.sum_us > 0);
  const pie = page.locator(`#${sectionId('GPU time by kernel type (all ranks)')} svg.pie .mark`);
  assert.equal(await pie.count(), Math.min(10, types.length), 'one slice per kernel type');
  await t.screenshot('gpu-charts');
}

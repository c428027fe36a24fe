// The input pipeline analyzer shows the API's step statistics, a step-time graph
// with one column per step, the host-side breakdown (input ops on XSpace, DataLoader
// stages on PyTorch traces) and the recommendations.

import { assertRowsMatch, assertShows, assertShowsMs, openToolPage, readTable, sectionId } from '../lib/ui.mjs';

export default async function (t) {
  const { page, assert } = t;
  const { result, report } = await openToolPage(t, 'input_pipeline_analyzer');

  const figures = page.locator('#step-statistics');
  const time = result.step_time_ms;
  for (const [label, value] of [['Average step time', time.average], ['Standard deviation', time.standard_deviation], ['Minimum', time.minimum], ['Maximum', time.maximum]]) {
    assertShowsMs(assert, await figures.locator('.stat', { hasText: label }).locator('dd').innerText(), value, label);
  }
  assertShows(assert, await figures.locator('.stat', { hasText: 'Waiting for input' }).locator('dd').innerText(), result.bottleneck.input_percent, 'input share');

  if (result.steps.some((step) => step.step_time_ms > 0)) {
    assert.equal(await page.locator('figure .column').count(), result.steps.length, 'one column per step');
  }
  const host = report.sections.find((section) => section.title.startsWith('Host-side analysis') || section.title.startsWith('DataLoader'));
  if (host && host.table) {
    const card = page.locator(`#${sectionId(host.title)}`);
    assertRowsMatch(assert, (await readTable(card)).rows, host.table.rows.slice(0, 25), host.title);
    const slices = host.title.startsWith('DataLoader')
      ? (result.dataloader ? result.dataloader.stages.filter((stage) => stage.time_ms > 0).length : 0)
      : Object.values(result.input_time_breakdown).filter((us) => us > 0).length;
    assert.equal(await card.locator('svg.pie .mark').count(), slices === 1 ? 0 : Math.min(10, slices), 'one pie slice per category with time (one is said in words)');
  }
  const recommendations = report.sections.find((section) => section.title === 'Recommendations');
  if (recommendations) {
    assert.equal(await page.locator('#recommendations p').count(), recommendations.notes.length, 'every recommendation is shown');
  }
  await t.screenshot('input_pipeline_analyzer-summary');
}

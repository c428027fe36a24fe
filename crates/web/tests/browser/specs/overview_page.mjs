// The overview page shows the API's numbers: average step time and its standard
// deviation, one column per step in the step-time graph with hover details, the
// step table, the top ops, and the run environment.

import { assertRowsMatch, assertShows, assertShowsMs, openToolPage, readTable, sectionId, tooltipOf, tooltipValue } from '../lib/ui.mjs';

export default async function (t) {
  const { page, assert } = t;
  const { result, report } = await openToolPage(t, 'overview_page');

  const figures = page.locator('#summary-figures');
  const time = result.steps.step_time_ms;
  assertShowsMs(assert, await figures.locator('.stat', { hasText: 'Average step time' }).locator('dd').innerText(), time.average, 'average step time');
  assertShowsMs(assert, await figures.locator('.stat', { hasText: 'Standard deviation' }).locator('dd').innerText(), time.standard_deviation, 'standard deviation');
  assertShows(assert, await figures.locator('.stat', { hasText: 'Steps' }).locator('dd').innerText(), result.steps.steps.length, 'steps');

  const steps = result.steps.steps;
  const stepsServed = (await t.api('/api/tools')).tools.some((tool) => tool.name === 'steps');
  if (steps.length > 0 && stepsServed) {
    // The CLI's hint (`--tool steps`) reads as a link to the Steps page of this run.
    const link = page.locator('#performance-summary a.tool-link');
    assert.equal(await link.count(), 1, 'the steps hint is a link');
    assert.match(await link.getAttribute('href'), /[?&]tool=steps(&|$)/, 'to the Steps page');
    assert.equal(await link.innerText(), 'the Steps page');
  }
  const columns = page.locator('#section-step_time_by_category_ms figure .column');
  if (steps.length > 0 && steps.some((step) => step.step_time_ms > 0)) {
    assert.equal(await columns.count(), steps.length, 'one column per step');
    // The chart takes the card's width (1400 px window: about 1000 px), not a fixed 900 px, at its height.
    const chart = await page.locator('#section-step_time_by_category_ms svg.columns').boundingBox();
    assert.ok(chart.width > 950 && chart.height < 330, `the step chart is ${chart.width}×${chart.height} px`);
    // A wider window draws the chart anew at the new width (its text keeps its size).
    const svg = page.locator('#section-step_time_by_category_ms svg.columns');
    const before = await svg.getAttribute('viewBox');
    const size = page.viewportSize();
    await page.setViewportSize({ width: 1920, height: size.height });
    await page.waitForFunction((old) => {
      const now = document.querySelector('#section-step_time_by_category_ms svg.columns');
      return now && now.getAttribute('viewBox') !== old;
    }, before);
    const wide = await svg.boundingBox();
    assert.ok(wide.width > chart.width + 400 && wide.height < 330, `redrawn at ${wide.width}×${wide.height} px`);
    assert.equal(await columns.count(), steps.length, 'the redrawn chart has every column');
    await page.setViewportSize(size);
    const tip = await tooltipOf(page, columns.first().locator('rect.hit'));
    assert.ok(tip.includes(steps[0].step_name), `the tooltip names the step: ${tip}`);
    assertShowsMs(assert, await tooltipValue(page, 'Step time'), steps[0].step_time_ms, 'step time in the tooltip (ms)');
    if (steps[0].host_compute_ms > 0) {
      assertShowsMs(assert, await tooltipValue(page, 'Host compute'), steps[0].host_compute_ms, 'host compute in the tooltip (ms)');
    }
  } else {
    assert.equal(await page.locator('#section-step_time_by_category_ms .chart-empty').count(), 1, 'no steps: the graph says so');
  }

  const top = report.sections.find((section) => section.title.startsWith('Top 10'));
  if (top) {
    const shown = await readTable(page.locator(`#${sectionId(top.title)}`));
    assertRowsMatch(assert, shown.rows, top.table.rows, 'top ops');
  }
  // Op placement in the framework's words: no TF ops or eager-execution shares on PyTorch.
  const { runs } = await t.api('api/runs');
  const { format } = runs[0]; // the newest run, the one openToolPage opened
  const summary = await page.locator('#performance-summary').innerText();
  assert.equal(summary.includes('TF op placement'), format !== 'kineto', `op placement on a ${format} run`);
  assert.ok(summary.includes('Op placement: device') || summary.includes('op placement: device'), 'placement shown');
  const environment = await page.locator('#environment').innerText();
  assert.ok(environment.includes(result.run_environment.device_type), 'the device type is shown');
  for (const host of result.run_environment.hosts) assert.ok(environment.includes(host), `host ${host} is listed`);
  await t.screenshot('overview_page-summary');
}

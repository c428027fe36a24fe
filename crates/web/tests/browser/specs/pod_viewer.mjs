// The pod viewer: the step slider walks the steps (the step lands in the URL), the
// chart has one stacked column per worker of that step, and hovering a column shows
// its step time and bottleneck.

import { assertShowsMs, openToolPage, ready, tooltipOf, tooltipValue } from '../lib/ui.mjs';

export default async function (t) {
  const { page, assert } = t;
  const { result } = await openToolPage(t, 'pod_viewer');
  const steps = result.steps;
  if (steps.length === 0) {
    assert.equal(await page.locator('#pod-step').count(), 0, 'no steps: no slider');
    return;
  }
  const slider = page.locator('#pod-step');
  assert.equal(await page.locator('#pod-step-label').innerText(), `Step ${steps[0].step_num} (1 of ${steps.length})`);
  await slider.focus();
  await page.keyboard.press('End');
  const last = steps[steps.length - 1];
  assert.equal(await page.locator('#pod-step-label').innerText(), `Step ${last.step_num} (${steps.length} of ${steps.length})`, 'End: the last step');
  assert.equal(new URL(page.url()).searchParams.get('step'), String(last.step_num), 'the step is in the URL');
  const columns = page.locator('#pod-chart .column');
  if (last.hosts.some((record) => record.total_duration_us > 0)) {
    assert.equal(await columns.count(), last.hosts.length, 'one column per worker');
    const tip = await tooltipOf(page, columns.first().locator('rect.hit'));
    assert.ok(tip.startsWith(last.hosts[0].host), `the tooltip names the worker: ${tip}`);
    assertShowsMs(assert, await tooltipValue(page, 'Step time'), last.hosts[0].total_duration_us / 1000, 'step time in the tooltip (ms)');
    assert.ok(tip.includes(last.hosts[0].bottleneck), 'the bottleneck is named');
  }
  await t.screenshot('pod_viewer-last-step');
  await page.reload();
  await ready(page);
  assert.equal(await slider.inputValue(), String(steps.length - 1), 'the step survives a reload');
}

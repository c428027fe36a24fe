// The memory profile: the summary figures equal the API's, the timeline chart
// has a point per timeline entry with hover (and keyboard) details, free memory
// can be shown and hidden from the legend, and the breakdown table at the peak
// equals the report's. On a PyTorch memory snapshot, the memory by stack at the
// peak and the fragmentation tables equal the report's, and a point's details name
// its allocating stack.

import { assertRowsMatch, mainSection, openToolPage, readTable, shownNumber } from '../lib/ui.mjs';

export default async function (t) {
  const { page, assert } = t;
  const { result, report } = await openToolPage(t, 'memory_profile');
  const allocator = result.length ? result[0].profile.allocators[0] : undefined;
  if (!allocator) {
    const summary = report.sections.find((section) => section.title.endsWith('Memory profile summary'));
    for (const note of summary.notes) assert.ok((await page.locator('main').innerText()).includes(note), `the page says: ${note}`);
    return;
  }

  const figures = page.locator('#memory-figures');
  const peak = allocator.summary.peak_stats;
  const peakText = await figures.locator('.stat', { hasText: 'Peak memory usage' }).locator('dd').innerText();
  const peakBytes = peak.peak_bytes_in_use || peak.heap_allocated_bytes + peak.stack_reserved_bytes;
  const unit = { B: 1, KiB: 2 ** 10, MiB: 2 ** 20, GiB: 2 ** 30 }[peakText.split(' ')[1]];
  // Three significant digits: within 0.5 % of the bytes.
  assert.ok(Math.abs(shownNumber(peakText).value * unit - peakBytes) <= 0.005 * peakBytes + 1, `peak ${peakText} vs ${peakBytes} bytes`);
  const peakTime = await figures.locator('.stat', { hasText: 'Time of the peak' }).locator('dd').innerText();
  assert.ok(Math.abs(shownNumber(peakTime).value - allocator.summary.peak_stats_time_ps / 1e9) <= 0.0005, `peak time ${peakTime}`);
  assert.equal(shownNumber(await figures.locator('.stat', { hasText: '#Allocations' }).locator('dd').innerText()).value, allocator.total_allocations);

  const chart = page.locator('#memory-timeline svg.lines');
  const plot = chart.locator('rect.hit');
  await plot.focus();
  await page.keyboard.press('Home');
  const tip = page.locator('.chart-tooltip');
  await tip.waitFor({ state: 'visible' });
  const first = allocator.timeline[0];
  const text = await tip.innerText();
  assert.ok(text.startsWith(first.activity.kind), `the first point's details: ${text}`);
  if (first.activity.tf_op_name) assert.ok(text.includes(first.activity.tf_op_name), 'the op of the first point');
  await page.keyboard.press('End');
  const last = allocator.timeline[allocator.timeline.length - 1];
  assert.ok((await tip.innerText()).startsWith(last.activity.kind), 'End: the last point');
  const box = await plot.boundingBox();
  await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
  assert.match(await tip.innerText(), /allocation|deallocation|free/i, 'hovering shows a point');

  const lines = await chart.locator('polyline').count();
  const free = page.locator('#memory-timeline .legend button', { hasText: 'Free' });
  const wasShown = (await free.getAttribute('aria-pressed')) === 'true';
  await free.click();
  assert.equal(await chart.locator('polyline').count(), lines + (wasShown ? -1 : 1), 'the legend hides and shows a line');
  await t.screenshot('memory_profile-timeline');

  const main = mainSection(report);
  const shown = await readTable(page.locator('#main-table'));
  assertRowsMatch(assert, shown.rows, main.table.rows.slice(0, 100), 'breakdown at the peak');

  if (result[0].profile.snapshot) {
    for (const [id, title] of [['section-memory_by_stack_at_the_peak', 'Memory by stack at the peak'], ['section-fragmentation_at_the_snapshot', 'Fragmentation at the snapshot']]) {
      const section = report.sections.find((s) => s.title === title);
      const table = await readTable(page.locator(`#${id}`));
      assertRowsMatch(assert, table.rows, section.table.rows.slice(0, 25), title);
    }
    await plot.focus();
    await page.keyboard.press('End');
    assert.ok((await tip.innerText()).includes('Stack'), 'a snapshot point names its stack');
    await t.screenshot('memory_profile-snapshot');
  }
}

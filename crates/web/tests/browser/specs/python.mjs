// The python tool: the flame graph draws the API's tree (the hot function `hot_spin`
// among its frames, a tooltip with its samples), a click zooms into a frame (it then
// spans the graph, the breadcrumb and the URL say so, Reset zoom undoes it), the
// thread selector redraws one thread, and the report's tables are below it.

import { assertSectionTables, openToolPage } from '../lib/ui.mjs';

/** The flame answer for `params` (an object) on run `run` (its name). */
function flameAnswer(t, run, params = {}) {
  return t.api(`api/python/flame?${new URLSearchParams({ run, host: 'all', ...params })}`);
}

/** Waits until the flame graph has drawn its latest answer. */
async function drawn(page) {
  await page.waitForSelector('#flame-chart[data-state="ready"]', { timeout: 30_000 });
}

export default async function (t) {
  const { page, assert } = t;
  // `run`: the name, as `/api/tool` answers it.
  const { run, report } = await openToolPage(t, 'python');
  const flame = await flameAnswer(t, run);
  await drawn(page);

  const chart = page.locator('#python-flame svg.flame');
  const hot = chart.locator('g.flame-node[aria-label^="hot_spin ("]');
  assert.ok(await hot.count() > 0, 'the flame graph draws hot_spin');
  assert.equal(await chart.locator('g.flame-node').first().getAttribute('aria-label'), 'all', 'the root comes first');
  const summary = await page.locator('#flame-summary').innerText();
  assert.ok(summary.includes(flame.total.toLocaleString('en-US')), `the summary counts the samples: ${summary}`);

  // Hovering a frame shows its function, file:line and samples.
  const widest = hot.first();
  const box = await widest.boundingBox();
  await page.mouse.move(box.x + Math.min(box.width / 2, 40), box.y + box.height / 2);
  const tip = page.locator('.chart-tooltip');
  await tip.waitFor({ state: 'visible' });
  const tipText = await tip.innerText();
  assert.match(tipText, /^hot_spin/, tipText);
  assert.match(tipText, /python_hot_loop\.py:\d+/, tipText);
  assert.match(tipText, /Self samples/, tipText);
  assert.match(tipText, /Total samples/, tipText);

  // Zoom into the first frame under the root: it then spans the whole width.
  const first = flame.root.children[0];
  const fullWidth = (await chart.locator('g.flame-node rect').first().boundingBox()).width;
  await chart.locator('g.flame-node', { has: page.locator('text') }).nth(1).click();
  await drawn(page);
  const crumbs = await page.locator('#flame-path .crumb').allInnerTexts();
  assert.deepEqual(crumbs, ['all', first.name], 'the breadcrumb names the zoomed frame');
  assert.equal(new URL(page.url()).searchParams.get('focus'), '0', 'the zoom is in the URL');
  const zoomed = page.locator('#python-flame svg.flame g.flame-node.focus rect');
  assert.ok(Math.abs((await zoomed.boundingBox()).width - fullWidth) <= 2, 'the zoomed frame spans the graph');
  assert.equal(await page.locator('#python-flame svg.flame g.flame-node.caller').count(), 1, 'its caller stays above it');
  await t.screenshot('python-flame-zoomed');
  await page.locator('#flame-reset').click();
  await drawn(page);
  assert.deepEqual(await page.locator('#flame-path .crumb').allInnerTexts(), ['all'], 'Reset zoom');

  // One thread: the graph counts that thread's samples only.
  const thread = flame.threads[flame.threads.length - 1];
  await page.locator('#flame-thread').selectOption(thread.name);
  await drawn(page);
  assert.equal(new URL(page.url()).searchParams.get('thread'), thread.name, 'the thread is in the URL');
  const one = await flameAnswer(t, run, { thread: thread.name });
  assert.equal(await page.locator('#python-flame svg.flame g.flame-node').first().getAttribute('aria-label'), thread.name);
  assert.ok((await page.locator('#flame-summary').innerText()).includes(`${one.total.toLocaleString('en-US')} running samples of ${thread.name}`));
  await page.locator('#flame-idle').check();
  await drawn(page);
  assert.equal(new URL(page.url()).searchParams.get('idle'), '1', 'waiting threads in the URL');
  const withIdle = await flameAnswer(t, run, { thread: thread.name, idle: '1' });
  assert.ok((await page.locator('#flame-summary').innerText()).startsWith(`${withIdle.total.toLocaleString('en-US')} samples`));
  await t.screenshot('python-flame-thread');

  // The link reopens the same view.
  await page.reload();
  await drawn(page);
  assert.equal(await page.locator('#flame-thread').inputValue(), thread.name, 'the thread comes back from the URL');
  assert.ok(await page.locator('#flame-idle').isChecked(), 'the toggle comes back from the URL');

  await assertSectionTables(t, report);
}

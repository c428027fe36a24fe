// The line under the page's title that says what the server reads or builds while the
// page waits (`#load-progress`, from /api/progress): present on every page, hidden once
// the server is idle for the run, and the endpoint answers `idle` then.

import { newestRun, open, ready } from '../lib/ui.mjs';

export default async function (t) {
  const { page, assert } = t;
  const run = await newestRun(t);
  await open(t, { run: run.name, tool: 'overview_page' });
  await ready(page);
  const line = page.locator('#load-progress');
  assert.equal(await line.count(), 1, 'the progress line is on the page');
  const idle = await t.api(`api/progress?run=${encodeURIComponent(run.name)}`);
  assert.equal(idle.stage, 'idle', 'nothing is read once the page has its answer');
  await page.waitForFunction(() => document.querySelector('#load-progress')?.hidden === true, null, { timeout: 10_000 });
  assert.equal(await line.isHidden(), true, 'an idle server shows no progress');
}

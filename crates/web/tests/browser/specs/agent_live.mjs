// The `mlprof agent` live page: a job the agent found on its own appears with the
// Python frame it runs most, the page updates from the event stream without a reload
// (the CPU line grows), the job's capture button records it and links to every mlprof
// tool on the capture (served by the agent), and a job that ended before the page opened is listed from the agent's
// history (MLPROF_UI_AGENT_ENDED_PID).
//
// Needs an agent watching a `python_hot_loop.py` job whose pid is MLPROF_UI_AGENT_PID:
// `cargo test -p mlprof --test ui_browser ui_agent_live` runs both; elsewhere the spec
// skips.

export default async function (t) {
  const pid = process.env.MLPROF_UI_AGENT_PID;
  if (!pid) t.skip('needs an mlprof agent watching a job (cargo test -p mlprof --test ui_browser ui_agent_live)');
  const { page, assert } = t;
  await page.goto(t.baseUrl);
  const card = page.locator(`section.job[data-pid="${pid}"]`);
  await card.waitFor({ timeout: 30_000 });
  await page.waitForFunction(
    (id) => document.querySelector(`section.job[data-pid="${id}"] .frame`)?.textContent.includes('hot_spin'),
    pid,
    { timeout: 60_000 },
  );
  assert.match(await card.locator('.name').textContent(), /^python_hot_loop\.py$/);
  assert.match(await card.locator('.cpu b').textContent(), /^\d+$/);

  // Live: more snapshots arrive and the CPU line is drawn, with no reload.
  await page.evaluate(() => { window.notReloaded = true; });
  const before = Number(await page.evaluate(() => document.body.dataset.updates));
  await page.waitForFunction((n) => Number(document.body.dataset.updates) >= n + 2, before, { timeout: 15_000 });
  assert.equal(await page.evaluate(() => window.notReloaded), true);
  assert.ok(await card.locator('svg polyline').count() >= 1, 'the CPU line is drawn');
  await t.screenshot('agent_live');

  // Capture: the button records the job and names the command that opens it.
  await card.locator('.capture-button').click();
  await card.locator('.capture code.command').waitFor({ timeout: 60_000 });
  assert.match(await card.locator('.capture code.command').textContent(), /^mlprof serve \/.+-\d+$/);
  assert.match(await card.locator('.capture').getAttribute('data-session'), /\/plugins\/profile\/[^/]+$/);
  await t.screenshot('agent_live_captured');

  // The capture opens in every mlprof tool, served by the agent.
  const link = await card.locator('.capture a.open').getAttribute('href');
  assert.match(link, new RegExp(`^http://127\\.0\\.0\\.1:\\d+/\\?run=python_hot_loop\\.py-${pid}/[0-9_]+$`));
  // (Another origin: the page never loads from one, so the test asks from here.)
  const url = new URL(link);
  const index = await fetch(link);
  assert.equal(index.status, 200);
  assert.match(await index.text(), /<html/i);
  const runs = await (await fetch(new URL('/api/runs', url))).json();
  assert.ok(runs.runs.some((run) => run.name === url.searchParams.get('run')), JSON.stringify(runs));

  // History: the job that ended is listed with its signals from disk; the running one
  // is not listed there.
  const ended = process.env.MLPROF_UI_AGENT_ENDED_PID;
  if (ended) {
    const row = page.locator(`#past tr[data-pid="${ended}"]`);
    await row.waitFor({ timeout: 45_000 });
    assert.match(await row.locator('td').first().textContent(), /^python_hot_loop\.py$/);
    assert.match(await row.locator('td').nth(3).textContent(), /^\d+%$/);
    assert.ok(await row.locator('svg polyline').count() >= 1, 'its CPU over its life is drawn');
    assert.equal(await page.locator(`#past tr[data-pid="${pid}"]`).count(), 0);
    await t.screenshot('agent_live_history');
  }
}

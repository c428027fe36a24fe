// Several ranks on one time axis: on a run with two or more hosts the host selector of
// the trace viewer offers every host together, aligned by clock or by step; choosing
// one draws every rank's sections (named after their rank) as /api/trace/meta lists
// them, says how the ranks were aligned, and keeps the choice in the URL. Opening the
// trace viewer from another tool's "All hosts" still shows one host.

/** Runs the checks; `t` is the harness context (see ../run.mjs). */
export default async function traceRanks(t) {
  const { page, assert } = t;
  const { runs } = await t.api('/api/runs');
  const run = runs.find((candidate) => candidate.hosts.length > 1);
  if (!run) t.skip('no run with two or more hosts here');
  const base = `run=${encodeURIComponent(run.name)}`;

  // From another tool's "All hosts", the trace viewer opens on one host.
  await page.goto(new URL(`?${base}&host=all&tool=overview_page`, t.baseUrl).href);
  await page.waitForSelector('#page[aria-busy="false"]');
  await page.selectOption('#tool-select', 'trace_viewer');
  await page.waitForSelector('.tv[data-ready="1"]');
  assert.equal(await page.inputValue('#host-select'), run.hosts[0], 'the first host, not every host, after a tool change');
  const choices = await page.locator('#host-select option').evaluateAll((options) => options.map((o) => o.value));
  assert.deepEqual(choices, ['all', 'all@steps', ...run.hosts], 'every host together by clock and by step, then each host');

  for (const [choice, alignment] of [['all', /^Hosts aligned by the hosts' clocks/], ['all@steps', /^Hosts aligned on step \d+/]]) {
    await page.selectOption('#host-select', choice);
    await page.waitForURL((url) => url.searchParams.get('host') === choice);
    await page.waitForSelector('.tv[data-ready="1"]');
    await settle(page);
    const meta = await t.api(`/api/trace/meta?${base}&host=${encodeURIComponent(choice)}`);
    const tracks = meta.sections.reduce((sum, section) => sum + section.tracks.length, 0);
    assert.equal(Number(await page.getAttribute('.tv', 'data-tracks')), tracks, `${choice}: one row per track of every host`);
    for (const host of run.hosts) {
      assert.ok(meta.sections.some((section) => section.name.startsWith(`${host} · `)), `${choice}: ${host}'s sections are there, named after it`);
    }
    assert.match(await page.locator('.tv-alignment').innerText(), alignment, `${choice}: says how the hosts were aligned`);
    await t.screenshot(`trace_ranks-${choice.replace('@', '-')}`);
  }
  // The choice is kept in the address: a reload shows every host again.
  await page.reload();
  await page.waitForSelector('.tv[data-ready="1"]');
  assert.equal(await page.inputValue('#host-select'), 'all@steps', 'the reloaded page shows every host by step');
}

/** Waits until the viewer has drawn and has nothing in flight. */
async function settle(page) {
  await page.waitForFunction(() => Number(document.querySelector('.tv').dataset.frames || 0) > 0);
  await page.waitForFunction(() => document.querySelector('.tv').dataset.countersReady === '1');
  await page.waitForFunction(() => document.querySelector('.tv').dataset.loading !== '1');
}

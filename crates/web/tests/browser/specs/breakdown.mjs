// The step-time breakdown control of XSpace runs (overview, input pipeline, pod
// viewer): choosing XProf shows exactly what `/api/tool?…&breakdown=xprof` answers,
// the choice lives in the URL (a reload keeps it, back returns to classic), stays
// when the tool changes, and Export CSV asks for the same breakdown. A bad value in
// the address is refused in the page, without asking the server.

import { assertRowsMatch, assertSectionTables, assertShows, assertShowsMs, newestRun, open, ready, readTable, sectionId, toolAnswer, watchToolRequests } from '../lib/ui.mjs';

/** The breakdown the control shows as chosen. */
function pressed(page) {
  return page.locator('#breakdown button[aria-pressed="true"]').getAttribute('data-value');
}

/** The `Breakdown: …` part of a step source, as the page shows it. */
function shownBreakdown(stepSource) {
  return `Shown: ${/Breakdown: (.*?)\.?$/.exec(stepSource)[1]}.`;
}

/** Asserts that the overview page shows `answer`'s numbers and says which breakdown they are. */
async function assertOverviewShows(t, answer, what) {
  const { page, assert } = t;
  const steps = answer.result.steps;
  const figures = page.locator('#summary-figures');
  const figure = (label) => figures.locator('.stat', { hasText: label }).locator('dd').innerText();
  assertShowsMs(assert, await figure('Average step time'), steps.step_time_ms.average, `${what}: average step time`);
  assertShowsMs(assert, await figure('Standard deviation'), steps.step_time_ms.standard_deviation, `${what}: standard deviation`);
  assertShows(assert, await figure('Input'), steps.bottleneck.input_percent, `${what}: input share`);
  const section = answer.report.sections.find((s) => s.title.startsWith('Step time by category'));
  const shown = await readTable(page.locator(`#${sectionId(section.title)}`));
  assertRowsMatch(assert, shown.rows, section.table.rows.slice(0, section.main ? 100 : 25), `${what}: step table`);
  assert.equal(await page.locator('#breakdown-shown').innerText(), shownBreakdown(steps.step_source), `${what}: the page says which breakdown it shows`);
}

export default async function (t) {
  const { page, assert } = t;
  const run = await newestRun(t);
  if (run.format !== 'xspace') {
    // Kineto steps have one breakdown: no control.
    await open(t, { run: run.name, tool: 'overview_page' });
    assert.equal(await page.locator('#breakdown').count(), 0, 'no breakdown control on a Kineto run');
    t.skip('the step-time breakdown applies to XSpace runs');
  }
  const classic = await toolAnswer(t, run, 'overview_page');
  const xprof = await toolAnswer(t, run, 'overview_page', 'all', { breakdown: 'xprof' });
  const requests = watchToolRequests(page);

  await open(t, { run: run.name, tool: 'overview_page' });
  assert.equal(await pressed(page), 'classic', 'classic is the default');
  await assertOverviewShows(t, classic, 'classic');

  await page.click('#breakdown button[data-value="xprof"]');
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get('breakdown'), 'xprof', 'the breakdown is in the URL');
  assert.equal(await pressed(page), 'xprof');
  assert.ok(requests.some((q) => q.get('tool') === 'overview_page' && q.get('breakdown') === 'xprof'), 'the page asked for the XProf breakdown');
  await assertOverviewShows(t, xprof, 'xprof');
  const csv = await page.locator('.export-csv').first().getAttribute('href');
  assert.equal(new URL(csv, t.baseUrl).searchParams.get('breakdown'), 'xprof', `Export CSV asks for the shown breakdown: ${csv}`);
  await t.screenshot('breakdown-xprof');

  await page.reload();
  await ready(page);
  assert.equal(await pressed(page), 'xprof', 'a reload keeps the breakdown');
  await assertOverviewShows(t, xprof, 'xprof after a reload');

  await page.goBack();
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get('breakdown'), null, 'back: the default breakdown again');
  assert.equal(await pressed(page), 'classic');
  await assertOverviewShows(t, classic, 'classic after back');
  await page.goForward();
  await ready(page);
  assert.equal(await pressed(page), 'xprof', 'forward: XProf again');
  await assertOverviewShows(t, xprof, 'xprof after forward');

  // The choice stays when the tool changes; the other step tools show their XProf numbers.
  await page.selectOption('#tool-select', 'input_pipeline_analyzer');
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get('breakdown'), 'xprof', 'the breakdown stays when the tool changes');
  assert.equal(await pressed(page), 'xprof');
  const input = await toolAnswer(t, run, 'input_pipeline_analyzer', 'all', { breakdown: 'xprof' });
  assertShowsMs(assert, await page.locator('#step-statistics .stat', { hasText: 'Average step time' }).locator('dd').innerText(), input.result.step_time_ms.average, 'input pipeline: average step time');
  assert.equal(await page.locator('#breakdown-shown').innerText(), shownBreakdown(input.result.step_source), 'input pipeline: which breakdown');

  await page.selectOption('#tool-select', 'pod_viewer');
  await ready(page);
  assert.equal(await pressed(page), 'xprof', 'the pod viewer shows the chosen breakdown');
  await assertSectionTables(t, (await toolAnswer(t, run, 'pod_viewer', 'all', { breakdown: 'xprof' })).report);

  await page.selectOption('#tool-select', 'framework_op_stats');
  await ready(page);
  assert.equal(await page.locator('#tool-options').count(), 0, 'no option controls where the breakdown does not matter');

  // A breakdown the API does not know, in the address: said in the page, the server is not asked.
  const before = requests.length;
  await page.goto(`${t.baseUrl}?${new URLSearchParams({ run: run.name, tool: 'overview_page', breakdown: 'fast' })}`);
  await ready(page);
  assert.match(await page.locator('.card.error').innerText(), /breakdown "fast"/, 'the page names the bad breakdown');
  assert.equal(requests.length, before, 'no tool request for a bad breakdown');
  await page.click('#breakdown button[data-value="classic"]');
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get('breakdown'), null, 'choosing Classic repairs the address');
  await assertOverviewShows(t, classic, 'classic after the repair');
}

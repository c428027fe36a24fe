// Navigation as in TensorBoard's Profile tab: the root opens the newest run's
// overview page; the selectors list the runs (newest first), the run's hosts with
// "all hosts", and the run's tools; choosing one changes the URL, back and forward
// return to the views before, a deep link opens its view, and one naming a tool or host
// the run does not have says what it shows instead.

import { newestRun, open, ready } from '../lib/ui.mjs';

async function options(page, id) {
  return page.locator(`#${id} option`).evaluateAll((nodes) => nodes.map((node) => ({ value: node.value, text: node.textContent, selected: node.selected })));
}

export default async function (t) {
  const { page, assert } = t;
  const { runs } = await t.api('api/runs');
  const run = await newestRun(t);

  await open(t, {});
  let params = new URL(page.url()).searchParams;
  assert.equal(params.get('run'), runs[0].name, 'the root opens the newest run');
  assert.equal(params.get('tool'), 'overview_page', 'the root opens the overview page');
  assert.equal(params.get('host'), 'all', 'the root shows all hosts');
  assert.equal(await page.locator('h1').innerText(), 'Overview');

  const runOptions = await options(page, 'run-select');
  assert.deepEqual(runOptions.map((o) => o.value), runs.map((r) => r.name), 'runs in the API order (newest first)');
  const hostOptions = await options(page, 'host-select');
  assert.deepEqual(hostOptions.map((o) => o.value), ['all', ...run.hosts], 'all hosts, then each host');
  const toolOptions = await options(page, 'tool-select');
  assert.deepEqual(toolOptions.map((o) => o.value), run.tools, "the run's tools");
  assert.ok(toolOptions.every((o) => o.text.length > 0), 'every tool has a label');
  await t.screenshot('navigation-root');

  // Choose another tool, then a host; back and forward walk through them.
  const second = run.tools.find((tool) => tool !== 'overview_page' && tool !== 'trace_viewer');
  await page.selectOption('#tool-select', second);
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get('tool'), second, 'choosing a tool puts it in the URL');
  const host = run.hosts[run.hosts.length - 1];
  await page.selectOption('#host-select', host);
  await ready(page);
  params = new URL(page.url()).searchParams;
  assert.equal(params.get('host'), host, 'choosing a host puts it in the URL');
  assert.equal(params.get('tool'), second, 'the tool stays when the host changes');
  assert.match(await page.locator('.page-context').innerText(), new RegExp(host.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')));

  await page.goBack();
  await ready(page);
  params = new URL(page.url()).searchParams;
  assert.equal(params.get('host'), 'all', 'back: all hosts again');
  assert.equal(params.get('tool'), second);
  assert.equal(await page.locator('#host-select').inputValue(), 'all', 'back: the host selector follows');
  await page.goBack();
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get('tool'), 'overview_page', 'back: the overview again');
  assert.equal(await page.locator('#tool-select').inputValue(), 'overview_page');
  assert.equal(await page.locator('h1').innerText(), 'Overview');
  await page.goForward();
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get('tool'), second, 'forward: the second tool again');

  // A deep link, and one naming a tool the run does not have (the overview instead).
  await open(t, { run: run.name, host, tool: second });
  assert.equal(await page.locator('#tool-select').inputValue(), second);
  assert.equal(await page.locator('#host-select').inputValue(), host);
  await open(t, { run: run.name, tool: 'no_such_tool' });
  assert.equal(new URL(page.url()).searchParams.get('tool'), 'overview_page', 'an unknown tool opens the overview');
  assert.equal(await page.locator('#notice').innerText(), 'There is no tool named no_such_tool; showing Overview.', 'and says so');
  await open(t, { run: run.name, tool: 'overview_page', host: 'no_such_host' });
  assert.equal(new URL(page.url()).searchParams.get('host'), 'all', 'an unknown host shows all hosts');
  assert.equal(await page.locator('#notice').innerText(), `${run.name} has no host named no_such_host; showing all hosts.`, 'and says so');
  await open(t, { run: run.name, tool: second });
  assert.equal(await page.locator('#notice').isVisible(), false, 'a view as asked: no notice');

  // Choosing another run (where there are several) opens it.
  if (runs.length > 1) {
    await page.selectOption('#run-select', runs[1].name);
    await ready(page);
    assert.equal(new URL(page.url()).searchParams.get('run'), runs[1].name);
  }
}

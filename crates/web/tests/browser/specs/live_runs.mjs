// Runs that training writes while the page is open, as TensorBoard shows them: a
// run added to the served log directory joins the run selector (newest first) at the
// page's next look, without a reload and without touching the view shown; a reload
// click that finds nothing new changes nothing; when the run shown is removed the
// page says so and keeps showing it (it does not switch on its own); when a host is
// added to the run shown, the page shows the run again with it.
//
// Needs a log directory it may write (MLPROF_UI_LOGDIR, served, holding one run) and
// a session directory to copy in (MLPROF_UI_SPARE_RUN): `cargo test -p mlprof --test
// ui_browser ui_live_runs` sets both; elsewhere the spec skips.

import { copyFile, cp, rename, rm } from 'node:fs/promises';
import { dirname, join } from 'node:path';
import { open, ready } from '../lib/ui.mjs';

/** The page looks every 15 s; the server rescans at most every 5 s. */
const POLL_WAIT_MS = 45_000;
/** The copied run's session: newer than every fixture session, so it is listed first. */
const NEW_SESSION = '2026_11_22_08_00_00';

async function runOptions(page) {
  return page.locator('#run-select option').evaluateAll((nodes) => nodes.map((node) => ({
    value: node.value, text: node.textContent, selected: node.selected, disabled: node.disabled,
  })));
}

async function clickReload(page) {
  await page.click('#reload-runs');
  await page.waitForSelector('#reload-runs[aria-busy="false"]');
}

/** Whether the view shown is still the element marked when it was first drawn (not drawn again). */
function stillDrawn(page) {
  return page.evaluate(() => document.querySelector('#page .page-body').dataset.mark === 'first-draw');
}

export default async function (t) {
  const logdir = process.env.MLPROF_UI_LOGDIR;
  const spare = process.env.MLPROF_UI_SPARE_RUN;
  if (!logdir || !spare) t.skip('needs a log directory to write (cargo test -p mlprof --test ui_browser ui_live_runs)');
  const { page, assert } = t;
  const { runs } = await t.api('api/runs');
  assert.equal(runs.length, 1, 'the log directory starts with one run');
  const first = runs[0].name;

  await open(t, { run: first, tool: 'overview_page', filter: 'train' });
  const url = page.url();
  await page.evaluate(() => { document.querySelector('#page .page-body').dataset.mark = 'first-draw'; });

  // Nothing changed: a reload click leaves the page as it is.
  await clickReload(page);
  assert.equal(page.url(), url, 'nothing new: the URL stays');
  assert.ok(await stillDrawn(page), 'nothing new: the page is not drawn again');
  assert.deepEqual((await runOptions(page)).map((o) => o.value), [first]);
  assert.equal(await page.locator('#notice').isVisible(), false, 'nothing new: no notice');

  // A run appears (written in a staging folder, then moved in, as a finished session would).
  const staging = join(dirname(logdir), 'staging');
  await cp(spare, join(staging, 'plugins', 'profile', NEW_SESSION), { recursive: true });
  await rename(staging, join(logdir, 'eval'));
  const added = `eval/${NEW_SESSION}`;
  await page.waitForFunction((name) => [...document.querySelectorAll('#run-select option')].some((o) => o.value === name), added, { timeout: POLL_WAIT_MS });
  const listed = (await t.api('api/runs')).runs.map((r) => r.name);
  assert.deepEqual(listed, [added, first], 'the API lists the new run first');
  let options = await runOptions(page);
  assert.deepEqual(options.map((o) => o.value), listed, 'the selector lists the runs as the API does, newest first');
  assert.equal(options.find((o) => o.selected).value, first, 'the run shown stays chosen');
  assert.equal(page.url(), url, 'a new run: the URL stays');
  assert.ok(await stillDrawn(page), 'a new run: the page is not drawn again');

  // The run shown is removed: the page says so and goes on showing it.
  await rm(join(logdir, 'train'), { recursive: true, force: true });
  const notice = page.locator('#notice');
  for (let tries = 0; tries < 20 && !(await notice.isVisible()); tries += 1) {
    await clickReload(page);
    if (!(await notice.isVisible())) await page.waitForTimeout(1000);
  }
  assert.ok(await notice.isVisible(), 'the page says that the run shown was removed');
  const said = await notice.innerText();
  assert.ok(said.includes(first) && said.includes('removed'), `the notice names the removed run: ${said}`);
  options = await runOptions(page);
  assert.deepEqual(options.map((o) => o.value), [first, added], 'the removed run stays in the selector only as the one shown');
  assert.ok(options[0].selected && options[0].disabled && options[0].text.includes('(removed)'), 'it is marked removed');
  assert.equal(page.url(), url, 'a removed run: the URL stays');
  assert.ok(await stillDrawn(page), 'a removed run: the page still shows it');
  await t.screenshot('live_runs-removed');

  // Choosing the new run opens it; the removed one is gone from the list.
  await page.selectOption('#run-select', added);
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get('run'), added);
  assert.equal(await notice.isVisible(), false, 'no notice once another run is chosen');
  assert.deepEqual((await runOptions(page)).map((o) => o.value), [added]);

  // A host joins the run shown (a second copy of its XSpace file): the page shows it again, with the host.
  const session = join(logdir, 'eval', 'plugins', 'profile', NEW_SESSION);
  await copyFile(join(session, 'vm.xplane.pb'), join(dirname(logdir), 'vm2.xplane.pb'));
  await rename(join(dirname(logdir), 'vm2.xplane.pb'), join(session, 'vm2.xplane.pb'));
  const hostListed = () => page.locator('#host-select option[value="vm2"]').count();
  for (let tries = 0; tries < 20 && (await hostListed()) === 0; tries += 1) {
    await clickReload(page);
    await ready(page);
    if ((await hostListed()) === 0) await page.waitForTimeout(1000);
  }
  assert.equal(await hostListed(), 1, 'the new host is listed');
  assert.match(await page.locator('.page-context').innerText(), /all hosts \(vm, vm2\)/, 'the page shows the run with both hosts');
  assert.equal(new URL(page.url()).searchParams.get('run'), added, 'the run shown stays');

  // A link to the removed run says that it is gone, and which run it shows instead.
  await open(t, { run: first, tool: 'overview_page' });
  assert.equal(new URL(page.url()).searchParams.get('run'), added);
  assert.ok((await notice.innerText()).includes(`no run named ${first}`), 'the page says the linked run is gone');
}

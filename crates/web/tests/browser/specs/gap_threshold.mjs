// The GPU gap threshold of the transfers page: the API's default is shown, a bad
// value is refused in the page with a message (the server, asked directly, refuses
// it too; the page does not ask), a good one shows exactly what
// `/api/tool?…&gap_threshold=1ms` answers, lives in the URL (reload, back/forward)
// and goes into Export CSV.

import { assertSectionTables, newestRun, open, ready, sectionId, toolAnswer, watchToolRequests } from '../lib/ui.mjs';

const DEFAULT_THRESHOLD_PS = 100_000_000;

/** Asserts that the page shows `answer`: every table, and the first section's notes (which name the threshold). */
async function assertShowsAnswer(t, answer, what) {
  await assertSectionTables(t, answer.report);
  const [first] = answer.report.sections;
  const text = await t.page.locator(`#${sectionId(first.title)}`).innerText();
  for (const note of first.notes.filter((n) => n.startsWith('GPU gaps'))) t.assert.ok(text.includes(note), `${what}: the page says ${JSON.stringify(note)}`);
}

async function apply(page, text) {
  await page.fill('#gap-threshold', text);
  await page.click('#gap-threshold-apply');
}

export default async function (t) {
  const { page, assert } = t;
  const run = await newestRun(t);
  if (!run.tools.includes('transfers')) t.skip('the run does not list transfers');
  const byDefault = await toolAnswer(t, run, 'transfers');
  assert.equal(byDefault.result.gap_threshold_ps, DEFAULT_THRESHOLD_PS, 'the API default is 100 us');
  const oneMs = await toolAnswer(t, run, 'transfers', 'all', { gap_threshold: '1ms' });
  assert.equal(oneMs.result.gap_threshold_ps, 1_000_000_000);
  const requests = watchToolRequests(page);

  await open(t, { run: run.name, tool: 'transfers' });
  assert.equal(await page.locator('#gap-threshold').inputValue(), '', 'no threshold asked for');
  assert.match(await page.locator('#gap-threshold').getAttribute('placeholder'), /100us \(default\)/, 'the default is shown');
  assert.equal(await page.locator('#gap-threshold-applied').innerText(), 'In effect: 100 µs.', 'the threshold in effect');
  await assertShowsAnswer(t, byDefault, 'default');

  // Bad input: refused in the page, by the server too, and never sent by the page.
  const asked = requests.length;
  for (const bad of ['bogus', '-5us', '10 parsecs', '1.2.3ms']) {
    await apply(page, bad);
    const message = page.locator('#gap-threshold-message');
    await message.waitFor({ state: 'visible' });
    assert.ok((await message.innerText()).includes(JSON.stringify(bad.split(' ')[1] || bad)), `the message names what is wrong: ${await message.innerText()}`);
    assert.equal(await page.locator('#gap-threshold').getAttribute('aria-invalid'), 'true', `${bad}: the field is marked invalid`);
    assert.equal(new URL(page.url()).searchParams.get('gap_threshold'), null, `${bad}: the URL keeps the threshold shown`);
    await assert.rejects(toolAnswer(t, run, 'transfers', 'all', { gap_threshold: bad }), /400 gap_threshold/, `the server refuses ${bad} too`);
  }
  assert.equal(requests.length, asked, 'no tool request for a bad threshold');
  await t.screenshot('gap_threshold-invalid');
  await page.fill('#gap-threshold', '1m');
  assert.equal(await page.locator('#gap-threshold-message').isVisible(), false, 'typing clears the message');

  // A good threshold: the API's answer for it, in the URL and the CSV link.
  await apply(page, '1ms');
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get('gap_threshold'), '1ms', 'the threshold is in the URL');
  assert.equal(await page.locator('#gap-threshold').inputValue(), '1ms');
  assert.equal(await page.locator('#gap-threshold-applied').innerText(), 'In effect: 1 ms.');
  await assertShowsAnswer(t, oneMs, '1ms');
  const csv = await page.locator('.export-csv').first().getAttribute('href');
  assert.equal(new URL(csv, t.baseUrl).searchParams.get('gap_threshold'), '1ms', `Export CSV asks for the shown threshold: ${csv}`);
  await t.screenshot('gap_threshold-1ms');

  await page.reload();
  await ready(page);
  assert.equal(await page.locator('#gap-threshold').inputValue(), '1ms', 'a reload keeps the threshold');
  await assertShowsAnswer(t, oneMs, '1ms after a reload');
  await page.goBack();
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get('gap_threshold'), null, 'back: the default again');
  await assertShowsAnswer(t, byDefault, 'default after back');
  await page.goForward();
  await ready(page);
  await assertShowsAnswer(t, oneMs, '1ms after forward');

  // Emptying the field goes back to the default.
  await apply(page, '');
  await ready(page);
  assert.equal(new URL(page.url()).searchParams.get('gap_threshold'), null, 'an empty field: the default');
  assert.equal(await page.locator('#gap-threshold-applied').innerText(), 'In effect: 100 µs.');

  // A bad threshold in the address: said in the page, the server is not asked.
  const before = requests.length;
  await page.goto(`${t.baseUrl}?${new URLSearchParams({ run: run.name, tool: 'transfers', gap_threshold: 'soon' })}`);
  await ready(page);
  assert.match(await page.locator('.card.error').innerText(), /"soon" is not a duration/);
  assert.equal(await page.locator('#gap-threshold-message').isVisible(), true, 'the field says what is wrong');
  assert.equal(requests.length, before, 'no tool request for a bad threshold in the address');
}

// The trace viewer's room and its range table, at 1280×800 and 1920×1080: the page never
// scrolls; the timeline takes at least 75 % of the window's height while the pane under
// it is closed and 55 % while it is open; Shift+drag from the ruler marks a range on
// every track and the pane lists what it holds exactly as /api/trace/aggregate does
// (its CSV export holds every name); the shortcut help fits with its Close button; the
// search results say when, how long and on which track; closing the pane gives the room
// back; holding W zooms smoothly and fetches detail as it goes. Screenshots of each
// state at both sizes.

const SIZES = [
  { width: 1280, height: 800 },
  { width: 1920, height: 1080 },
];

/** Runs the checks; `t` is the harness context (see ../run.mjs). */
export default async function traceLayout(t) {
  const { page, assert } = t;
  const { runs } = await t.api('/api/runs');
  const run = runs.find((candidate) => candidate.hosts.length > 0);
  assert.ok(run, 'the server lists a run with a host');
  const query = `run=${encodeURIComponent(run.name)}&host=${encodeURIComponent(run.hosts[0])}`;
  for (const size of SIZES) {
    const label = `${size.width}x${size.height}`;
    await page.setViewportSize(size);
    await page.goto(new URL(`?${query}&tool=trace_viewer`, t.baseUrl).href);
    await page.waitForSelector('.tv[data-ready="1"]');
    await settle(page);

    const closed = await room(page);
    assert.equal(await page.getAttribute('.tv', 'data-pane'), 'closed', `${label}: no pane before anything is chosen`);
    assert.ok(closed.page <= size.height, `${label}: the page is ${closed.page} px high in a ${size.height} px window`);
    assert.ok(closed.timeline >= 0.75 * size.height, `${label}: the timeline gets ${closed.timeline} of ${size.height} px`);
    // Too many flows for the width: a readable share is drawn, not none.
    const hidden = Number(await page.getAttribute('.tv', 'data-flows-hidden'));
    const drawn = Number(await page.getAttribute('.tv', 'data-flows-drawn'));
    if (hidden > 0) assert.ok(drawn > 0 && drawn <= size.width / 3, `${label}: ${drawn} flow arrows drawn, ${hidden} left out`);
    await t.screenshot(`trace_layout-${label}-closed`);

    await markFromTheRuler(page, 0.3, 0.6);
    await page.waitForSelector('.tv-range-pane:not([hidden]) .tv-range-summary');
    const open = await room(page);
    assert.equal(await page.getAttribute('.tv', 'data-pane'), 'range', `${label}: the pane shows the range`);
    assert.ok(open.page <= size.height, `${label}: with the pane, the page is ${open.page} px high`);
    assert.ok(open.timeline >= 0.55 * size.height, `${label}: with the pane, the timeline gets ${open.timeline} px`);
    await checkRangeTable(t, query);
    await t.screenshot(`trace_layout-${label}-range`);

    await page.keyboard.press('?');
    const close = await page.locator('.tv-help-box button').boundingBox();
    const help = await page.locator('.tv-help-box').boundingBox();
    assert.ok(close && close.y + close.height <= size.height && help.y >= 0, `${label}: the help's Close button is on screen`);
    assert.equal(await page.textContent('.tv-help-box h3'), 'Trace viewer controls');
    await t.screenshot(`trace_layout-${label}-help`);
    await page.keyboard.press('Escape');

    await page.click('.tv-pane-close');
    assert.equal(await page.getAttribute('.tv', 'data-pane'), 'closed');
    assert.ok((await room(page)).timeline >= 0.75 * size.height, `${label}: closing the pane gives the room back`);
  }
  await checkHeldZoom(t);
  await checkPinAndFilter(t, query);
  await checkReorder(t, query);
  await checkCounters(t, query);
  await checkSearchResults(t, query);
}

/** P pins the selected event's track first (in the URL); the filter box keeps the tracks whose name holds its text. */
async function checkPinAndFilter(t, query) {
  const { page, assert } = t;
  const probe = await openViewer(t, query);
  const before = await probe('tracks');
  const events = (await probe('events')).filter((event) => event.width >= 4);
  const target = events.reduce((best, event) => (event.track > best.track ? event : best), events[0]);
  assert.ok(target, 'an event to select');
  await page.mouse.click(target.x, target.y);
  await page.waitForFunction((id) => document.querySelector('.tv').dataset.selected === String(id), target.id);
  await page.locator('.tv-stage').focus();
  await page.keyboard.press('p');
  const pinned = await probe('tracks');
  assert.equal(pinned[0].id, target.track, 'P puts the track first');
  assert.equal(pinned[0].section, 'Pinned');
  assert.equal(pinned.length, before.length, 'a pinned track leaves its section');
  assert.match(page.url(), new RegExp(`[?&]pinned=${target.track}(&|$)`), 'the pin is in the URL');
  assert.equal(await page.textContent('.tv-pin'), 'Unpin track (P)');
  await page.click('.tv-pin');
  assert.deepEqual((await probe('tracks')).map((track) => track.id), before.map((track) => track.id), 'unpinned, the order is back');

  const word = before[before.length - 1].name.split(/[\s(/]+/).find((part) => part.length >= 3) || before[0].name;
  await page.fill('.tv-track-filter', word);
  const filtered = await probe('tracks');
  assert.ok(filtered.length > 0, `some track matches ${word}`);
  assert.ok(filtered.every((track) => `${track.name} ${track.section}`.toLowerCase().includes(word.toLowerCase())), `only tracks holding ${word}`);
  assert.match(page.url(), /[?&]track_filter=/, 'the filter is in the URL');
  await page.fill('.tv-track-filter', '');
  assert.equal((await probe('tracks')).length, before.length, 'an empty filter shows every track');
}

/** Dragging a track's name onto the track above moves it there, within its section; the order is in the URL and survives a reload. */
async function checkReorder(t, query) {
  const { page, assert } = t;
  const probe = await openViewer(t, query);
  const before = await probe('tracks');
  // The first section shown with two tracks or more, the second's top on screen (a
  // track of deep stacks can be taller than the window: its top is grabbed).
  const box = await page.locator('.tv-stage').boundingBox();
  const index = before.findIndex((track, i) => i > 0 && before[i - 1].section === track.section && track.top + 20 < box.y + box.height);
  if (index < 0) t.skip('no section with two tracks in view');
  const [upper, lower] = [before[index - 1], before[index]];
  const x = box.x + 40;
  await page.mouse.move(x, lower.top + 8);
  await page.mouse.down();
  await page.mouse.move(x, lower.top + 4, { steps: 2 });
  await page.mouse.move(x, upper.top + 4, { steps: 4 });
  await page.mouse.up();
  const after = await probe('tracks');
  assert.deepEqual([after[index - 1].id, after[index].id], [lower.id, upper.id], `${lower.name} now comes before ${upper.name}`);
  assert.equal(after.length, before.length, 'no track lost');
  assert.ok(after.every((track, i) => track.section === before[i].section), 'every track stays in its section');
  await page.waitForURL((url) => (url.searchParams.get('track_order') || '').split(',').includes(String(lower.id)));
  await page.reload();
  await page.waitForSelector('.tv[data-ready="1"]');
  await settle(page);
  const reloaded = await probe('tracks');
  assert.deepEqual(reloaded.map((track) => track.id), after.map((track) => track.id), 'the order survives a reload');
}

/** Counter tracks: one row per series of /api/trace/counters, drawn, with its reading on hover. */
async function checkCounters(t, query) {
  const { page, assert } = t;
  const meta = await t.api(`/api/trace/meta?${query}`);
  const answer = await t.api(`/api/trace/counters?${query}&start_ps=${meta.start_ps}&end_ps=${meta.end_ps}&width_px=100`);
  await page.goto(new URL(`?${query}&tool=trace_viewer`, t.baseUrl).href);
  await page.waitForSelector('.tv[data-ready="1"]');
  await settle(page);
  if (answer.series.length === 0) {
    assert.equal(await page.getAttribute('.tv', 'data-counters'), null, 'no counters, no Counters section');
    return;
  }
  await page.waitForSelector('.tv[data-counters]');
  await settle(page);
  assert.equal(Number(await page.getAttribute('.tv', 'data-counters')), answer.series.length, 'a counter track per series');
  const rows = await page.evaluate(() => document.querySelector('.tv').traceViewerProbe.counters());
  assert.ok(rows.length > 0 && rows.every((row) => answer.series.some((s) => s.name === row.name && s.group === row.group)), JSON.stringify(rows));
  assert.ok(rows.some((row) => row.points > 0), 'counter readings are drawn');
  const row = rows.find((one) => one.points > 0);
  const box = await page.locator('.tv-stage').boundingBox();
  await page.mouse.move(box.x + box.width * 0.8, row.y);
  const tip = await page.locator('.tv-tooltip').innerText();
  assert.ok(tip.startsWith(`${row.name}: `), `the tooltip gives the reading: ${tip}`);
  await t.screenshot('trace_layout-counters');
}

/** Holding W zooms smoothly, well past one step, and detail arrives while it is held. */
async function checkHeldZoom(t) {
  const { page, assert } = t;
  const state = () => page.evaluate(() => document.querySelector('.tv').traceViewerProbe.state());
  const frames = () => page.evaluate(() => Number(document.querySelector('.tv').dataset.frames || 0));
  await page.keyboard.press('0');
  await settle(page);
  const box = await page.locator('.tv-stage').boundingBox();
  await page.mouse.move(box.x + box.width * 0.6, box.y + box.height / 2);
  const before = await state();
  const framesBefore = await frames();
  await page.keyboard.down('w');
  await page.waitForTimeout(800);
  const framesHeld = await frames();
  await page.keyboard.up('w');
  const after = await state();
  const ratio = (after.endPs - after.startPs) / (before.endPs - before.startPs);
  assert.ok(ratio < 0.8 ** 4, `holding W for 0.8 s zooms in smoothly past one step (span × ${ratio.toFixed(3)})`);
  assert.ok(framesHeld > framesBefore, 'detail arrives while the key is held, not only at release');
}

/** The stage's height and the page's, in CSS px. */
function room(page) {
  return page.evaluate(() => ({
    timeline: document.querySelector('.tv-stage').getBoundingClientRect().height,
    page: document.documentElement.scrollHeight,
  }));
}

/** Shift+drags along the ruler from `from` to `to` (fractions of the timeline's width). */
async function markFromTheRuler(page, from, to) {
  const box = await page.locator('.tv-stage').boundingBox();
  const { labelWidth } = await page.evaluate(() => document.querySelector('.tv').traceViewerProbe.state());
  const x = (fraction) => box.x + labelWidth + (box.width - labelWidth) * fraction;
  const y = box.y + 10;
  await page.keyboard.down('Shift');
  await page.mouse.move(x(from), y);
  await page.mouse.down();
  await page.mouse.move(x(to), y, { steps: 6 });
  await page.mouse.up();
  await page.keyboard.up('Shift');
}

/** The pane's rows equal /api/trace/aggregate's for the marked range and tracks; the CSV has every name. */
async function checkRangeTable(t, query) {
  const { page, assert } = t;
  const mark = await page.evaluate(() => document.querySelector('.tv').traceViewerProbe.state().mark);
  assert.ok(mark && mark.endPs > mark.startPs && mark.tracks.length > 0, `a range on tracks is marked: ${JSON.stringify(mark)}`);
  const range = `start_ps=${Math.floor(mark.startPs)}&end_ps=${Math.ceil(mark.endPs)}&tracks=${mark.tracks.join(',')}`;
  const answer = await t.api(`/api/trace/aggregate?${query}&${range}&limit=1000`);
  await page.waitForFunction(() => document.querySelector('.tv-range-pane').dataset.events !== undefined);
  assert.equal(Number(await page.getAttribute('.tv-range-pane', 'data-events')), answer.events, 'the pane counts the API’s events');
  const shown = await page.$$eval('.tv-range-table tbody tr', (rows) =>
    rows.map((row) => ({
      name: row.cells[0].getAttribute('title'),
      count: Number(row.cells[1].textContent.replaceAll(',', '')),
      total_ps: Number(row.cells[2].dataset.ps),
      self_ps: Number(row.cells[3].dataset.ps),
    })),
  );
  assert.deepEqual(
    shown,
    answer.rows.map((row) => ({ name: row.name, count: row.count, total_ps: row.total_ps, self_ps: row.self_ps })),
    'the range table is the API’s, most time first',
  );
  assert.ok(shown.length > 0, 'the middle of the trace holds events');
  const href = await page.getAttribute('.tv-range-summary a', 'href');
  const csv = await page.evaluate(async (url) => (await fetch(url)).text(), href);
  assert.equal(csv.trim().split('\n').length, answer.names + 1, 'the CSV export holds every name');
  // Sorting by count, largest first.
  await page.click('.tv-range-table th:nth-child(2) button');
  const counts = await page.$$eval('.tv-range-table tbody tr', (rows) => rows.map((row) => Number(row.cells[1].textContent.replaceAll(',', ''))));
  assert.deepEqual(counts, [...counts].sort((a, b) => b - a), 'a click on Count sorts by it');
}

/** Each search result says its start, duration and track. */
async function checkSearchResults(t, query) {
  const { page, assert } = t;
  const meta = await t.api(`/api/trace/meta?${query}`);
  const names = new Map(meta.sections.flatMap((section) => section.tracks.map((track) => [track.id, track.name])));
  const view = await t.api(`/api/trace/view?${query}&start_ps=${meta.start_ps}&end_ps=${meta.end_ps}&width_px=200`);
  const name = view.names.find((text) => text.length >= 3);
  assert.ok(name, 'some event has a name to search for');
  await page.fill('.tv-search-input', name);
  await page.press('.tv-search-input', 'Enter');
  await page.waitForSelector('.tv-results:not([hidden]) .tv-results-list li');
  const found = await t.api(`/api/trace/search?${query}&q=${encodeURIComponent(name)}&limit=1`);
  const where = await page.textContent('.tv-results-list li .tv-result-where');
  const [start, duration, track] = where.split(' · ');
  assert.equal(track, names.get(found.results[0].track), `the first result names its track: ${where}`);
  assert.match(start, /^[\d.,]+ (s|ms|µs|ns|ps)$/, `the first result gives its start: ${where}`);
  assert.match(duration, /^(0|[\d.,]+ (s|ms|µs|ns|ps))$/, `the first result gives its duration: ${where}`);
  await t.screenshot('trace_layout-search');
}

/** Opens the trace viewer on `query`, waits for it, and returns a caller of its probe. */
async function openViewer(t, query) {
  const { page } = t;
  await page.goto(new URL(`?${query}&tool=trace_viewer`, t.baseUrl).href);
  await page.waitForSelector('.tv[data-ready="1"]');
  await settle(page);
  return (what) => page.evaluate((name) => document.querySelector('.tv').traceViewerProbe[name](), what);
}

/** Waits until the viewer has drawn and has nothing in flight. */
async function settle(page) {
  await page.waitForFunction(() => Number(document.querySelector('.tv').dataset.frames || 0) > 0);
  // The counter tracks (above the sections) are in place.
  await page.waitForFunction(() => document.querySelector('.tv').dataset.countersReady === '1');
  await page.waitForTimeout(150);
  await page.waitForFunction(() => document.querySelector('.tv').dataset.loading !== '1');
}

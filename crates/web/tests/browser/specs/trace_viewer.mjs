// The trace viewer against the real server: tracks appear, W and the wheel zoom, A/D and
// dragging pan, a click selects an event whose args match /api/trace/event, search jumps
// to the first match at or after the window's start and Enter / Shift+Enter step through
// every match across result pages, flow arrows are drawn where /api/trace/view
// returns flows (and the details pane follows them), the URL restores window and
// selection, section headers fold, and the view survives a resize. It reads the viewer's state through
// `.tv`'s `traceViewerProbe` (window, selection, where events and arrows are drawn).

/** Runs the checks; `t` is the harness context (see ../run.mjs). */
export default async function traceViewer(t) {
  const { page, assert } = t;
  const { run, host, gpu } = await pickRun(t);
  const query = `run=${encodeURIComponent(run)}&host=${encodeURIComponent(host)}`;
  const meta = await t.api(`/api/trace/meta?${query}`);
  const trackCount = meta.sections.reduce((sum, section) => sum + section.tracks.length, 0);
  assert.ok(trackCount > 0, `${run}/${host}: /api/trace/meta lists no tracks`);

  await page.goto(new URL(`?${query}&tool=trace_viewer`, t.baseUrl).href);
  await page.waitForSelector('.tv[data-ready="1"]');
  await settle(page);
  assert.equal(Number(await page.getAttribute('.tv', 'data-tracks')), trackCount, 'one row per track of the meta');
  assert.ok((await probe(page, 'events')).length > 0, 'events are drawn in the initial view');
  await t.screenshot('trace_viewer-initial');

  await checkFold(t, meta);
  await checkZoom(page, assert);
  await checkPan(page, assert);
  const selected = await checkSelect(t, query);
  await t.screenshot('trace_viewer-selected');
  assert.match(page.url(), new RegExp(`[?&]event=${selected}(&|$)`), 'the selection is in the URL');
  assert.match(page.url(), /[?&]start_ps=-?\d+/, 'the window start is in the URL');

  await checkSearch(t, query, meta);
  await t.screenshot('trace_viewer-search');
  await checkSearchPages(t, query, meta);
  await checkFlows(t, query, meta, gpu);
  await checkHelpAndResize(t);
}

/**
 * A run with GPU data (the `gpu` tool) when the server has one, else the first run; its
 * first host. `gpu` says which it is.
 */
async function pickRun(t) {
  const { runs } = await t.api('/api/runs');
  t.assert.ok(runs.length > 0, 'the server lists at least one run');
  const ordered = [...runs.filter((run) => run.format === 'kineto'), ...runs.filter((run) => run.format !== 'kineto')];
  for (const candidate of ordered.slice(0, 6)) {
    const exact = await t.api(`/api/run?run=${encodeURIComponent(candidate.name)}`);
    if (exact.tools.includes('gpu') && exact.hosts.length > 0)
      return { run: exact.name, host: exact.hosts[0], gpu: true };
  }
  return { run: runs[0].name, host: runs[0].hosts[0], gpu: false };
}

/** Calls `traceViewerProbe[what]()` in the page. */
function probe(page, what) {
  return page.evaluate((name) => document.querySelector('.tv').traceViewerProbe[name](), what);
}

/** Waits until the viewer has no request pending or in flight (debounce included). */
async function settle(page) {
  await page.waitForFunction(() => Number(document.querySelector('.tv').dataset.frames || 0) > 0);
  // The counter tracks (above the sections) are in place.
  await page.waitForFunction(() => document.querySelector('.tv').dataset.countersReady === '1');
  await page.waitForTimeout(150);
  await page.waitForFunction(() => document.querySelector('.tv').dataset.loading !== '1');
}

/** The middle of the timeline (right of the labels) in page coordinates. */
async function timelineMiddle(page) {
  const box = await page.locator('.tv-stage').boundingBox();
  const { labelWidth } = await probe(page, 'state');
  return { x: box.x + labelWidth + (box.width - labelWidth) / 2, y: box.y + box.height / 2, box, labelWidth };
}

function span(state) {
  return state.endPs - state.startPs;
}

async function checkZoom(page, assert) {
  const { x, y } = await timelineMiddle(page);
  await page.mouse.move(x, y);
  const before = await probe(page, 'state');
  for (let i = 0; i < 3; i++) await page.keyboard.press('w');
  const afterW = await probe(page, 'state');
  assert.ok(span(afterW) < span(before) * 0.6, `W zooms in (${span(before)} → ${span(afterW)} ps)`);

  const anchorBefore = afterW.startPs + span(afterW) * 0.5;
  await page.mouse.wheel(0, -300);
  await page.waitForTimeout(100);
  const afterWheel = await probe(page, 'state');
  assert.ok(span(afterWheel) < span(afterW) * 0.9, 'the wheel zooms in');
  const anchorAfter = afterWheel.startPs + span(afterWheel) * 0.5;
  assert.ok(Math.abs(anchorAfter - anchorBefore) < span(afterWheel) * 0.02, 'the wheel zooms around the pointer');
  await page.keyboard.press('s');
  const afterS = await probe(page, 'state');
  assert.ok(span(afterS) > span(afterWheel) * 1.1, 'S zooms out');
  await settle(page);
}

async function checkPan(page, assert) {
  const before = await probe(page, 'state');
  await page.keyboard.press('d');
  const afterD = await probe(page, 'state');
  assert.ok(afterD.startPs > before.startPs, 'D pans right');
  await page.keyboard.press('a');
  await page.keyboard.press('a');
  const afterA = await probe(page, 'state');
  assert.ok(afterA.startPs < afterD.startPs, 'A pans left');
  assert.ok(Math.abs(span(afterA) - span(before)) < span(before) * 1e-6, 'panning keeps the zoom');

  const { x, y, box, labelWidth } = await timelineMiddle(page);
  const psPerPx = span(afterA) / (box.width - labelWidth);
  await page.mouse.move(x, y);
  await page.mouse.down();
  await page.mouse.move(x - 150, y, { steps: 6 });
  await page.mouse.up();
  const afterDrag = await probe(page, 'state');
  const moved = (afterDrag.startPs - afterA.startPs) / psPerPx;
  assert.ok(Math.abs(moved - 150) < 20, `dragging 150 px left moves the window ~150 px later (moved ${moved} px)`);
  await settle(page);
}

/** Clicks a drawn event, checks the details pane against /api/trace/event; returns its id. */
async function checkSelect(t, query) {
  const { page, assert } = t;
  let events = (await probe(page, 'events')).filter((event) => event.width >= 6);
  for (let i = 0; i < 8 && events.length === 0; i++) {
    await page.keyboard.press('w');
    await settle(page);
    events = (await probe(page, 'events')).filter((event) => event.width >= 6);
  }
  assert.ok(events.length > 0, 'some event is drawn at least 6 px wide');
  const target = events.reduce((best, event) => (event.width > best.width ? event : best), events[0]);
  await page.mouse.click(target.x, target.y);
  await page.waitForFunction((id) => document.querySelector('.tv').dataset.selected === String(id), target.id);
  const event = await t.api(`/api/trace/event?${query}&id=${target.id}`);
  assert.equal(event.name, target.name, 'the clicked event is the one drawn there');
  assert.equal(await page.textContent('.tv-details-title'), event.name, 'the details pane names the event');
  const shown = await page.$$eval('.tv-args tr', (rows) =>
    rows.map((row) => [row.querySelector('th').textContent, row.querySelector('td').textContent]),
  );
  assert.deepEqual(
    shown,
    Object.entries(event.args).map(([key, value]) => [key, String(value)]),
    'every arg is shown',
  );
  const fields = await page.$$eval('.tv-fields tr', (rows) =>
    Object.fromEntries(rows.map((row) => [row.querySelector('th').textContent, row.querySelector('td').getAttribute('title') || row.querySelector('td').textContent])),
  );
  assert.equal(fields.Track, event.track_name, 'the details pane names the track');
  assert.equal(fields.Start, `${event.start_ps} ps`, 'the details pane shows the start (exact on hover)');
  assert.equal(fields.Duration, `${event.dur_ps} ps`, 'the details pane shows the duration (exact on hover)');
  await page.waitForTimeout(300); // the URL follows the window after a short rest
  return target.id;
}

/**
 * Searches a name whose first match from the window's start on lies outside the window
 * and checks the jump lands on it.
 */
async function checkSearch(t, query, meta) {
  const { page, assert } = t;
  // A narrow window (1 µs) in the middle: most names have no match starting in it.
  const middle = Math.floor((meta.start_ps + meta.end_ps) / 2);
  await page.goto(
    new URL(`?${query}&tool=trace_viewer&start_ps=${middle}&end_ps=${middle + 1_000_000}`, t.baseUrl).href,
  );
  await page.waitForSelector('.tv[data-ready="1"]');
  await settle(page);
  const window = await probe(page, 'state');
  const found = await searchTarget(t, query, meta, window);
  assert.ok(found, 'some event name has its first match from the window on outside the window');
  const { text, answer, first } = found;
  await page.fill('.tv-search-input', text);
  await page.press('.tv-search-input', 'Enter');
  await page.waitForFunction((id) => document.querySelector('.tv').dataset.selected === String(id), first.id);
  const after = await probe(page, 'state');
  assert.ok(
    after.startPs <= first.start_ps && first.start_ps + first.dur_ps <= after.endPs,
    'the jump shows the result',
  );
  assert.equal(await page.textContent('.tv-details-title'), first.name, 'the details pane shows the result');
  const head = await page.textContent('.tv-results-head');
  assert.ok(head.startsWith(answer.total.toLocaleString('en-US')), `the result list gives the total (${head})`);
  await settle(page);
  const drawn = await probe(page, 'events');
  assert.ok(
    drawn.some((event) => event.id === first.id),
    'the result is drawn after the jump',
  );
  await page.locator('.tv-search-input').blur();
  await settle(page);
}

/**
 * A search text whose first match at or after the window's start (or, with none there,
 * its first match) lies wholly outside `window`: names of events drawn wholly before or
 * after the window, tried in turn. `first` is that match, `answer` the first page.
 */
async function searchTarget(t, query, meta, window) {
  const tracks = meta.sections.flatMap((section) => section.tracks.map((track) => track.id)).join(',');
  const regions = [
    [meta.start_ps, Math.floor(window.startPs)],
    [Math.ceil(window.endPs), meta.end_ps],
  ].filter(([from, to]) => to > from);
  const names = new Set();
  for (const [from, to] of regions) {
    const view = await t.api(`/api/trace/view?${query}&start_ps=${from}&end_ps=${to}&width_px=2000&tracks=${tracks}`);
    for (const track of view.tracks) {
      for (const [start, dur, , name] of track.events) {
        if (start >= from && start + dur <= to) names.add(view.names[name]);
      }
    }
  }
  for (const name of [...names].slice(0, 40)) {
    const q = `${query}&q=${encodeURIComponent(name)}`;
    const answer = await t.api(`/api/trace/search?${q}&limit=1`);
    const fromWindow = await t.api(`/api/trace/search?${q}&limit=1&after_ps=${Math.floor(window.startPs) - 1}`);
    const first = fromWindow.results[0] ?? answer.results[0];
    if (first && (first.start_ps > window.endPs || first.start_ps + first.dur_ps < window.startPs)) {
      return { text: name, answer, first };
    }
  }
  return null;
}

/**
 * With three results per page, Enter and Shift+Enter step through a name's matches
 * across page boundaries (and around the ends), in the order of one big page, and the
 * count says "k of N".
 */
async function checkSearchPages(t, query, meta) {
  const { page, assert } = t;
  const text = await namesWithManyMatches(t, query, meta);
  assert.ok(text, 'some event name has at least 10 matches');
  const all = (await t.api(`/api/trace/search?${query}&q=${encodeURIComponent(text)}&limit=10000`)).results;
  await page.evaluate(() => document.querySelector('.tv').traceViewerProbe.setSearchPageSize(3));
  const window = await probe(page, 'state');
  const from = all.findIndex((result) => result.start_ps >= Math.floor(window.startPs));
  let rank = from < 0 ? 0 : from;
  // The selection may already be the expected event (from an earlier search), so wait
  // for the count too.
  const expectAt = async (what) => {
    const count = `${(rank + 1).toLocaleString('en-US')} of ${all.length.toLocaleString('en-US')}`;
    const arrived = (expected) =>
      document.querySelector('.tv').dataset.selected === String(expected.id) &&
      document.querySelector('.tv-search-count').textContent === expected.count;
    await page.waitForFunction(arrived, { id: all[rank].id, count }, { timeout: 10_000 }).catch(() => {});
    assert.equal(await page.getAttribute('.tv', 'data-selected'), String(all[rank].id), what);
    assert.equal(await page.textContent('.tv-search-count'), count, what);
  };
  await page.fill('.tv-search-input', '');
  await page.press('.tv-search-input', 'Enter'); // clears the last query, so the next Enter is a new search
  await page.fill('.tv-search-input', text);
  await page.press('.tv-search-input', 'Enter');
  await expectAt('a new search starts at the first match from the window on');
  for (let step = 0; step < 5; step += 1) {
    await page.press('.tv-search-input', 'Enter');
    rank = (rank + 1) % all.length;
    await expectAt(`Enter #${step + 1} goes to the next match`);
  }
  for (let step = 0; step < 9; step += 1) {
    await page.press('.tv-search-input', 'Shift+Enter');
    rank = (rank - 1 + all.length) % all.length;
    await expectAt(`Shift+Enter #${step + 1} goes to the previous match`);
  }
  const listed = await page.locator('.tv-results-list li').count();
  assert.ok(listed <= 3, `the list holds one page (${listed})`);
  await page.locator('.tv-search-input').blur();
  await settle(page);
}

/** A name of an event in the trace with 10 to 10 000 matches, or null. */
async function namesWithManyMatches(t, query, meta) {
  const tracks = meta.sections.flatMap((section) => section.tracks.map((track) => track.id)).join(',');
  const view = await t.api(
    `/api/trace/view?${query}&start_ps=${meta.start_ps}&end_ps=${meta.end_ps}&width_px=4000&tracks=${tracks}`,
  );
  for (const name of view.names.slice(0, 60)) {
    const answer = await t.api(`/api/trace/search?${query}&q=${encodeURIComponent(name)}&limit=1`);
    if (answer.total >= 10 && answer.total <= 10000) return name;
  }
  return null;
}

/**
 * Opens a narrow window around a flow the API returns and checks its arrow is drawn. A
 * run with GPU data must have flows (launch → kernel); a CPU-only one may have none.
 */
async function checkFlows(t, query, meta, gpu) {
  const { page, assert } = t;
  const tracks = meta.sections.flatMap((section) => section.tracks.map((track) => track.id)).join(',');
  const whole = await t.api(
    `/api/trace/view?${query}&start_ps=${meta.start_ps}&end_ps=${meta.end_ps}&width_px=1000&tracks=${tracks}`,
  );
  if (gpu) assert.ok(whole.flows.length > 0, 'a trace with GPU kernels has launch → kernel flows');
  if (whole.flows.length === 0) return;
  const reach = (flow) => Math.abs(flow[5] - flow[2]);
  const [fromId, , fromPs, toId, , toPs] = whole.flows.reduce((best, flow) =>
    reach(flow) < reach(best) ? flow : best,
  );
  const margin = Math.max(20_000_000, Math.abs(toPs - fromPs));
  const start = Math.max(meta.start_ps, Math.min(fromPs, toPs) - margin);
  const end = Math.min(meta.end_ps, Math.max(fromPs, toPs) + margin);
  await page.goto(
    new URL(`?${query}&tool=trace_viewer&start_ps=${start}&end_ps=${end}&event=${fromId}`, t.baseUrl).href,
  );
  await page.waitForSelector('.tv[data-ready="1"]');
  await page.waitForFunction((id) => document.querySelector('.tv').dataset.selected === String(id), fromId);
  await settle(page);
  const state = await probe(page, 'state');
  assert.ok(Math.abs(state.startPs - start) < 2 && Math.abs(state.endPs - end) < 2, 'the window comes from the URL');
  const arrows = await probe(page, 'flows');
  assert.ok(
    arrows.some((arrow) => arrow.from === fromId && arrow.to === toId),
    `the arrow of flow ${fromId} → ${toId} is drawn`,
  );
  assert.equal(await page.getAttribute('.tv', 'data-flows-hidden'), '0', 'no arrow is hidden at this zoom');
  await t.screenshot('trace_viewer-flows');
  await page.click(`.tv-flows button[data-event="${toId}"]`);
  await page.waitForFunction((id) => document.querySelector('.tv').dataset.selected === String(id), toId);
  const target = await t.api(`/api/trace/event?${query}&id=${toId}`);
  const after = await probe(page, 'state');
  assert.ok(
    after.startPs <= target.start_ps && target.start_ps <= after.endPs,
    'following the flow shows its other end',
  );
}

/** Folds and unfolds the first section by clicking its header. */
async function checkFold(t, meta) {
  const { page, assert } = t;
  const before = Number(await page.getAttribute('.tv', 'data-tracks'));
  const box = await page.locator('.tv-stage').boundingBox();
  // The first section's header: the first row under the ruler, after the counter tracks
  // when there are any (a header of 24 px and 38 px per counter).
  const counters = Number((await page.getAttribute('.tv', 'data-counters')) || 0);
  const header = { x: box.x + 60, y: box.y + 26 + (counters ? 24 + 38 * counters : 0) + 12 };
  await page.mouse.click(header.x, header.y);
  const folded = Number(await page.getAttribute('.tv', 'data-tracks'));
  assert.equal(folded, before - meta.sections[0].tracks.length, 'clicking a section header folds it');
  await t.screenshot('trace_viewer-folded');
  await page.mouse.click(header.x, header.y);
  assert.equal(Number(await page.getAttribute('.tv', 'data-tracks')), before, 'clicking it again unfolds it');
}

async function checkHelpAndResize(t) {
  const { page, assert } = t;
  await page.keyboard.press('?');
  assert.ok(await page.isVisible('.tv-help'), '? opens the shortcut help');
  await t.screenshot('trace_viewer-help');
  await page.keyboard.press('Escape');
  assert.ok(!(await page.isVisible('.tv-help')), 'Esc closes it');
  const size = page.viewportSize();
  const wide = await page.$eval('.tv-canvas', (element) => element.clientWidth);
  await page.setViewportSize({ width: 900, height: 700 });
  await page.waitForFunction((width) => document.querySelector('.tv-canvas').clientWidth < width, wide);
  await page.keyboard.press('0');
  await page.evaluate(() => {
    document.querySelector('.tv-scroller').scrollTop = 0;
  });
  await settle(page);
  const canvas = await page.$eval('.tv-canvas', (element) => [element.width, element.clientWidth, devicePixelRatio]);
  assert.equal(
    canvas[0],
    Math.round(canvas[1] * canvas[2]),
    'the canvas follows the new size at the device pixel ratio',
  );
  assert.ok((await probe(page, 'events')).length > 0, 'events are drawn after a resize');
  await t.screenshot('trace_viewer-resized');
  await page.setViewportSize(size);
}

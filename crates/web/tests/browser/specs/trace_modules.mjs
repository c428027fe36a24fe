// The trace viewer's pure modules, imported from the server into the page and checked
// there: points in time and ruler ticks (durations: number_format.mjs), window math, the row layout, hit testing, the
// colour hash, and the view loader's debounce / abort / stale-answer rules (with a fake
// API whose answers the test releases by hand).

/** Runs the checks; `t` is the harness context (see ../run.mjs). */
export default async function traceModules(t) {
  const { page, assert } = t;
  await page.goto(new URL('static/favicon.svg', t.baseUrl).href);
  const results = await page.evaluate(runInPage);
  for (const [name, actual, expected] of results) assert.deepEqual(actual, expected, name);
}

/** Runs in the page: returns [name, actual, expected] triples. */
async function runInPage() {
  const time = await import('/static/trace/time.js');
  const viewport = await import('/static/trace/viewport.js');
  const layout = await import('/static/trace/layout.js');
  const palette = await import('/static/trace/palette.js');
  const { TrackStore } = await import('/static/trace/store.js');
  const { ViewLoader } = await import('/static/trace/loader.js');
  const checks = [];
  const check = (name, actual, expected) => checks.push([name, actual, expected]);
  const round = (window) => ({ startPs: Math.round(window.startPs), endPs: Math.round(window.endPs) });

  check('time at µs resolution', time.formatTime(390_001_234_567, 1e6), '390.001 ms');
  check('nice steps', [1, 3, 7, 20, 180, 4999].map(time.niceStep), [1, 5, 10, 20, 200, 5000]);

  const whole = time.rulerTicks(0, 4e11, 1100);
  check(
    'whole-trace ticks',
    whole.ticks.map((tick) => tick.label),
    ['0 ms', '50 ms', '100 ms', '150 ms', '200 ms', '250 ms', '300 ms', '350 ms', '400 ms'],
  );
  check('whole-trace ticks are absolute', whole.basePs, null);
  const narrow = time.rulerTicks(63.6e9, 63.8e9, 1000);
  check(
    'narrow ticks keep the window unit',
    narrow.ticks.slice(0, 3).map((tick) => tick.label),
    ['63.6 ms', '63.65 ms', '63.7 ms'],
  );
  const deep = time.rulerTicks(389_997_000_000, 390_006_000_000, 1100);
  check(
    'deep ticks are offsets from a base',
    deep.ticks.every((tick) => tick.label.startsWith('+')),
    true,
  );
  check('the base precedes the window', deep.basePs <= 389_997_000_000, true);
  check(
    'offsets add up',
    deep.ticks.map((tick) => tick.ps - deep.basePs),
    deep.ticks.map((_, i) => 7e6 + i * 1e6),
  );

  const trace = { startPs: 0, endPs: 1e9 };
  const window = { startPs: 2e8, endPs: 4e8 };
  const zoomed = viewport.zoomAround(trace, window, 0.5, 0.25);
  check('zoom halves the span', zoomed.endPs - zoomed.startPs, 1e8);
  check('zoom keeps the anchor', zoomed.startPs + 0.25 * (zoomed.endPs - zoomed.startPs), 2.5e8);
  const tiny = viewport.zoomAround(trace, window, 1e-9);
  check('zoom stops at 1 ns', tiny.endPs - tiny.startPs, viewport.MIN_SPAN_PS);
  check('zoom out stops at the trace plus margins', round(viewport.zoomAround(trace, window, 100)), {
    startPs: -5e7,
    endPs: 1.05e9,
  });
  check('pan moves by a fraction', round(viewport.panBy(trace, window, 0.5)), { startPs: 3e8, endPs: 5e8 });
  check('pan stops after the end', round(viewport.panBy(trace, window, 100)), { startPs: 8.5e8, endPs: 1.05e9 });
  check('fit puts the range in the middle third', round(viewport.fitRange(trace, 5e8, 1e6)), {
    startPs: 499_000_000,
    endPs: 502_000_000,
  });
  check('center keeps the zoom', round(viewport.centerOn(trace, window, 7e8, 1e6)), {
    startPs: 600_500_000,
    endPs: 800_500_000,
  });
  check('center fits what is too wide', round(viewport.centerOn(trace, window, 1e8, 3e8)), {
    startPs: -5e7,
    endPs: 8.5e8,
  });
  check('full window', round(viewport.fullWindow(trace)), { startPs: -1e7, endPs: 1.01e9 });

  const sections = [
    {
      name: 'GPU',
      kind: 'device',
      tracks: [
        { id: 1, name: 's1', depth: 1 },
        { id: 2, name: 's2', depth: 3 },
      ],
    },
    { name: 'CPU', kind: 'host', tracks: [{ id: 3, name: 't1', depth: 0 }] },
  ];
  const open = layout.buildLayout(sections, new Set());
  const level = layout.LEVEL_HEIGHT;
  const pad = layout.TRACK_PADDING;
  check(
    'rows',
    open.rows.map((row) => [row.kind, row.y]),
    [
      ['section', 0],
      ['track', layout.SECTION_HEIGHT],
      ['track', layout.SECTION_HEIGHT + level + 2 * pad],
      ['section', layout.SECTION_HEIGHT + 4 * level + 4 * pad],
      ['track', 2 * layout.SECTION_HEIGHT + 4 * level + 4 * pad],
    ],
  );
  check('height counts empty tracks as one level', open.height, 2 * layout.SECTION_HEIGHT + 5 * level + 6 * pad);
  check('row at y', layout.rowAt(open, layout.SECTION_HEIGHT + level + 2 * pad + 1).track.id, 2);
  check('no row below the last', layout.rowAt(open, open.height + 1), null);
  const folded = layout.buildLayout(sections, new Set([0]));
  check(
    'a folded section keeps its header only',
    folded.rows.map((row) => row.kind),
    ['section', 'section', 'track'],
  );
  check('tracks of a folded section point at its header', folded.byTrack.get(2).kind, 'section');
  check('level centre', layout.levelCenter(open.byTrack.get(2), 2), open.byTrack.get(2).y + pad + 2.5 * level);

  check('colours are stable', palette.colorForName('volta_sgemm'), palette.colorForName('volta_sgemm'));
  check('colours differ by name', palette.colorForName('volta_sgemm') !== palette.colorForName('volta_hgemm'), true);
  check('hash', palette.hashName('a'), 0xe40c292c);

  const store = new TrackStore();
  store.apply({
    query: { tracks: [1, 2] },
    response: {
      names: ['k', 'run'],
      tracks: [
        {
          id: 1,
          events: [
            [100, 50, 0, 0, 7],
            [300, 10, 0, 0, 8],
          ],
          merged: [[200, 210, 0, 12, 1]],
        },
      ],
      flows: [[7, 1, 100, 8, 1, 300]],
    },
  });
  check('hit inside an event', store.hit(1, 0, 120, 5).id, 7);
  check('hit near an event within the slack', store.hit(1, 0, 297, 5).id, 8);
  check('hit a merged run', store.hit(1, 0, 205, 5), {
    kind: 'merged',
    name: 'run',
    startPs: 200,
    endPs: 210,
    depth: 0,
    count: 12,
  });
  check('miss', store.hit(1, 0, 400, 5), null);
  check('other level', store.hit(1, 1, 120, 5), null);
  check('a track asked for and not answered is empty', store.tracks.get(2).events.length, 0);
  check('depth of a loaded event', store.depthOf(8), 0);

  // The loader: a fake API whose answers the test releases.
  const calls = [];
  const api = {
    rejectOnAbort: true,
    view(query, signal) {
      return new Promise((resolve, reject) => {
        const call = { query, resolve, aborted: false };
        signal.addEventListener('abort', () => {
          call.aborted = true;
          if (api.rejectOnAbort) reject(new DOMException('aborted', 'AbortError'));
        });
        calls.push(call);
      });
    },
  };
  const frames = [];
  const errors = [];
  const loader = new ViewLoader(api, {
    onFrame: (frame) => frames.push(frame),
    onBusy: () => {},
    onError: (error) => errors.push(error.message),
  });
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  const visible = (startPs, endPs) => ({ startPs, endPs, widthPx: 1000, tracks: [2, 1] });
  loader.request(visible(0, 1000));
  loader.request(visible(100, 1100));
  loader.request(visible(200, 1200));
  await sleep(150);
  check('requests in quick succession send one', calls.length, 1);
  check('the last one, padded and with sorted tracks', calls[0].query, {
    startPs: -50,
    endPs: 1450,
    widthPx: 1500,
    tracks: [1, 2],
  });
  loader.request(visible(5000, 6000));
  await sleep(150);
  check('a new request aborts the one in flight', [calls.length, calls[0].aborted], [2, true]);
  calls[1].resolve({ names: [], tracks: [], flows: [] });
  await sleep(10);
  check('the answer arrives as a frame', frames.length, 1);
  loader.request(visible(5100, 6100));
  await sleep(150);
  check('a window the last answer covers sends nothing', calls.length, 2);
  loader.request({ ...visible(5100, 6100), tracks: [1, 2, 3] });
  await sleep(150);
  check('a new track sends a request', calls.length, 3);
  api.rejectOnAbort = false; // an answer that arrives although its request was superseded
  loader.request(visible(5100, 5600));
  await sleep(150);
  const stale = calls[2];
  stale.resolve({ names: ['stale'], tracks: [], flows: [] });
  calls[3].resolve({ names: ['fresh'], tracks: [], flows: [] });
  await sleep(10);
  check(
    'a stale answer is dropped',
    frames.map((frame) => frame.response.names[0] ?? ''),
    ['', 'fresh'],
  );
  check('aborts are not errors', errors, []);
  // A view that keeps moving (a held key) still asks every MAX_WAIT_MS, not only at rest.
  const before = calls.length;
  for (let i = 0; i < 20; i++) {
    loader.request(visible(20000 + i * 1000, 21000 + i * 1000));
    await sleep(20);
  }
  check('a moving view asks while it moves', calls.length - before >= 2, true);
  loader.cancel();
  return checks;
}

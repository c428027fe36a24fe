// What tests and scripts may read of a mounted trace viewer without parsing pixels:
// its state and where each event and flow arrow is drawn; and one knob, the search's
// page size, so a test can step across result pages in a few steps. The viewer's root
// element carries it as `traceViewerProbe`; nothing in the viewer depends on it.

import { counterKey } from './draw.js';
import { RULER_HEIGHT, levelCenter, rowsBetween } from './layout.js';

/**
 * `{state(), events(), counters(), tracks(), flows(), setSearchPageSize(n)}` for `viewer`
 * (`tracks()`: the track rows in layout order, `{id, name, section}`). Positions are CSS
 * pixels in the page's viewport, as mouse events use them.
 */
export function traceProbe(viewer) {
  return {
    state: () => ({
      startPs: viewer.window.startPs,
      endPs: viewer.window.endPs,
      selected: viewer.selected ? viewer.selected.id : null,
      mark: viewer.mark,
      loading: viewer.root.dataset.loading === '1',
      labelWidth: viewer.labelWidth(),
      scrollTop: viewer.scroller.scrollTop,
    }),
    events: () => drawnEvents(viewer),
    counters: () => drawnCounters(viewer),
    tracks: () => {
      const origin = viewer.stage.getBoundingClientRect();
      const top = viewer.scroller.scrollTop;
      // top, y: the top and the middle of the track's row on the page (it may be scrolled out of view).
      return viewer.layout.rows.filter((row) => row.kind === 'track').map((row) => ({
        id: row.track.id,
        name: row.track.name,
        section: row.section.name,
        top: origin.top + RULER_HEIGHT + row.y - top,
        y: origin.top + RULER_HEIGHT + row.y - top + row.height / 2,
      }));
    },
    flows: () => drawnFlows(viewer),
    setSearchPageSize: (size) => {
      viewer.search.pageSize = size;
    },
  };
}

/** Events drawn individually in view: `{id, name, track, x, y, width}` (x, y: the middle). */
function drawnEvents(viewer) {
  const left = viewer.labelWidth();
  const right = viewer.width();
  const psPerPx = viewer.psPerPx();
  const top = viewer.scroller.scrollTop;
  const origin = viewer.stage.getBoundingClientRect();
  const out = [];
  for (const row of rowsBetween(viewer.layout, top, top + viewer.height() - RULER_HEIGHT)) {
    if (row.kind !== 'track') continue;
    const data = viewer.store.tracks.get(row.track.id);
    if (!data) continue;
    for (const event of data.events) {
      const x0 = Math.max(left, left + (event[0] - viewer.window.startPs) / psPerPx);
      const x1 = Math.min(right, left + (event[0] + event[1] - viewer.window.startPs) / psPerPx);
      const y = RULER_HEIGHT + levelCenter(row, event[2]) - top;
      if (x1 < x0 || y < RULER_HEIGHT || y > viewer.height()) continue;
      out.push({
        id: event[4],
        name: data.names[event[3]] ?? '',
        track: row.track.id,
        x: origin.left + (x0 + x1) / 2,
        y: origin.top + y,
        width: x1 - x0,
      });
    }
  }
  return out;
}

/** Counter rows in view: `{name, group, points, y}` (y: the row's middle, page px). */
function drawnCounters(viewer) {
  const top = viewer.scroller.scrollTop;
  const origin = viewer.stage.getBoundingClientRect();
  return rowsBetween(viewer.layout, top, top + viewer.height() - RULER_HEIGHT)
    .filter((row) => row.kind === 'counter')
    .map((row) => {
      const data = viewer.counterData.get(counterKey(row.series));
      return { name: row.series.name, group: row.series.group, points: data ? data.points.length : 0, y: origin.top + RULER_HEIGHT + row.y - top + row.height / 2 };
    });
}

/** Flows of the latest view answer between known tracks: `{from, to, x0, y0, x1, y1}`. */
function drawnFlows(viewer) {
  const left = viewer.labelWidth();
  const psPerPx = viewer.psPerPx();
  const top = viewer.scroller.scrollTop;
  const origin = viewer.stage.getBoundingClientRect();
  const xOf = (ps) => origin.left + left + (ps - viewer.window.startPs) / psPerPx;
  const yOf = (row, eventId) => origin.top + RULER_HEIGHT + levelCenter(row, viewer.store.depthOf(eventId)) - top;
  const out = [];
  for (const [fromId, fromTrack, fromPs, toId, toTrack, toPs] of viewer.store.flows) {
    const fromRow = viewer.layout.byTrack.get(fromTrack);
    const toRow = viewer.layout.byTrack.get(toTrack);
    if (!fromRow || !toRow) continue;
    out.push({
      from: fromId,
      to: toId,
      x0: xOf(fromPs),
      y0: yOf(fromRow, fromId),
      x1: xOf(toPs),
      y1: yOf(toRow, toId),
    });
  }
  return out;
}

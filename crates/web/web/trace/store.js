// What the viewer has received from /api/trace/view, per track. A track keeps its last
// answer until a newer answer that asked for it arrives, so tracks scrolled or zoomed
// away keep a frame to draw while their next one loads. Times stay absolute (ps), so an
// older frame is drawn at the right place under any window.

import { colorForName } from './palette.js';

/** The last view answer for each track, plus the flows of the latest answer. */
export class TrackStore {
  constructor() {
    /**
     * Track id → `{names, colors, events, merged, eventOrder, mergedOrder, stripeOrder,
     * resolutionPs}`: arrays as API.md sends them, each name's colour, and the draw
     * orders (indexes grouped by name, then depth and start, so the canvas sets each
     * colour once; merged runs by depth and start, so touching runs are striped as one).
     */
    this.tracks = new Map();
    /** `[fromEvent, fromTrack, fromPs, toEvent, toTrack, toPs]` of the latest answer. */
    this.flows = [];
    this.depths = new Map();
  }

  /** Takes a loader frame: the tracks it asked for are replaced (missing ones emptied). */
  apply({ query, response }) {
    const names = Array.isArray(response.names) ? response.names : [];
    const answered = new Map();
    for (const track of Array.isArray(response.tracks) ? response.tracks : []) answered.set(track.id, track);
    const colors = names.map((name) => colorForName(String(name)));
    for (const id of query.tracks) {
      const track = answered.get(id);
      const events = track && Array.isArray(track.events) ? track.events : [];
      const merged = track && Array.isArray(track.merged) ? track.merged : [];
      this.tracks.set(id, {
        names,
        colors,
        events,
        merged,
        eventOrder: drawOrder(events, 3),
        mergedOrder: drawOrder(merged, 4),
        stripeOrder: timeOrder(merged),
        resolutionPs: response.resolution_ps,
      });
    }
    this.flows = Array.isArray(response.flows) ? response.flows : [];
    this.depths = new Map();
    for (const data of this.tracks.values()) {
      for (const event of data.events) this.depths.set(event[4], event[2]);
    }
  }

  /** Nesting level of a loaded event, or 0 when it is not loaded individually. */
  depthOf(eventId) {
    return this.depths.get(eventId) ?? 0;
  }

  /**
   * What is drawn at time `ps` (± `slackPs`) on level `depth` of track `trackId`:
   * `{kind: 'event', name, startPs, durPs, depth, id}`, `{kind: 'merged', name, startPs,
   * endPs, depth, count}` or null. An event containing `ps` wins over a nearby one.
   */
  hit(trackId, depth, ps, slackPs) {
    const data = this.tracks.get(trackId);
    if (!data) return null;
    let best = null;
    let bestDistance = Infinity;
    for (const event of data.events) {
      if (event[2] !== depth) continue;
      const distance = distanceTo(ps, event[0], event[0] + event[1]);
      if (distance <= slackPs && distance < bestDistance) {
        bestDistance = distance;
        best = event;
      }
    }
    if (best && bestDistance === 0) return eventHit(best, data.names);
    let bestRun = null;
    for (const run of data.merged) {
      if (run[2] !== depth) continue;
      const distance = distanceTo(ps, run[0], run[1]);
      if (distance <= slackPs && distance < bestDistance) {
        bestDistance = distance;
        bestRun = run;
      }
    }
    if (bestRun) {
      return {
        kind: 'merged',
        name: data.names[bestRun[4]] ?? '',
        startPs: bestRun[0],
        endPs: bestRun[1],
        depth: bestRun[2],
        count: bestRun[3],
      };
    }
    return best ? eventHit(best, data.names) : null;
  }

  /** Forgets everything (a new run or host). */
  clear() {
    this.tracks.clear();
    this.flows = [];
    this.depths.clear();
  }
}

/** Indexes of `items` sorted by name (column `nameAt`), then depth, then start. */
function drawOrder(items, nameAt) {
  const order = new Uint32Array(items.length);
  for (let i = 0; i < order.length; i++) order[i] = i;
  return order.sort((a, b) => {
    const x = items[a];
    const y = items[b];
    return x[nameAt] - y[nameAt] || x[2] - y[2] || x[0] - y[0];
  });
}

/** Indexes of `items` sorted by depth, then start. */
function timeOrder(items) {
  const order = new Uint32Array(items.length);
  for (let i = 0; i < order.length; i++) order[i] = i;
  return order.sort((a, b) => items[a][2] - items[b][2] || items[a][0] - items[b][0]);
}

function eventHit(event, names) {
  return {
    kind: 'event',
    startPs: event[0],
    durPs: event[1],
    depth: event[2],
    name: names[event[3]] ?? '',
    id: event[4],
  };
}

/** Distance in ps from `ps` to the interval [start, end] (0 inside). */
function distanceTo(ps, start, end) {
  if (ps < start) return start - ps;
  if (ps > end) return ps - end;
  return 0;
}

// Fetches /api/trace/view for the visible window: debounced, but never held back longer
// than MAX_WAIT_MS while the view keeps moving (a held W key or a drag gets fresh
// detail as it goes); one request in flight (a newer one aborts the older), answers to
// anything but the latest request dropped.
// Each request covers the window plus PAD of its width on both sides at the same
// resolution, so small pans are drawn from data already here and need no request.

import { isAbort } from './api.js';

/** Extra width fetched on each side, as a fraction of the visible window. */
const PAD = 0.25;
/** Quiet time after the last viewport change before a request goes out. */
const DEBOUNCE_MS = 60;
/** Longest a wanted request waits while the viewport keeps changing. */
const MAX_WAIT_MS = 150;

/** Loads view frames for the viewer; `onFrame({query, response})` gets each answer. */
export class ViewLoader {
  constructor(api, { onFrame, onBusy, onError }) {
    this.api = api;
    this.onFrame = onFrame;
    this.onBusy = onBusy;
    this.onError = onError;
    this.sequence = 0;
    this.timer = 0;
    this.waitingSince = null;
    this.controller = null;
    this.covered = null;
  }

  /**
   * Asks for `{startPs, endPs, widthPx, tracks}` (the visible window, its width in
   * pixels, the visible track ids) unless the last answer already covers it.
   */
  request(visible) {
    if (visible.tracks.length === 0 || visible.widthPx < 1) return;
    if (this.covered && covers(this.covered, visible)) return;
    clearTimeout(this.timer);
    const now = performance.now();
    if (this.waitingSince === null) this.waitingSince = now;
    const delay = Math.max(0, Math.min(DEBOUNCE_MS, this.waitingSince + MAX_WAIT_MS - now));
    this.timer = setTimeout(() => {
      this.waitingSince = null;
      this.send(visible);
    }, delay);
  }

  /** Forgets what the last answer covered, so the next request always goes out. */
  invalidate() {
    this.covered = null;
  }

  /** Sends the request now, aborting the one in flight. */
  async send(visible) {
    const span = visible.endPs - visible.startPs;
    const query = {
      startPs: visible.startPs - span * PAD,
      endPs: visible.endPs + span * PAD,
      widthPx: visible.widthPx * (1 + 2 * PAD),
      tracks: [...visible.tracks].sort((a, b) => a - b),
    };
    if (this.controller) this.controller.abort();
    const controller = new AbortController();
    this.controller = controller;
    const sequence = ++this.sequence;
    this.onBusy(true);
    try {
      const response = await this.api.view(query, controller.signal);
      if (sequence !== this.sequence) return;
      this.covered = query;
      this.onFrame({ query, response });
    } catch (error) {
      if (!isAbort(error) && sequence === this.sequence) this.onError(error);
    } finally {
      if (sequence === this.sequence) {
        this.controller = null;
        this.onBusy(false);
      }
    }
  }

  /** Stops the pending timer and the request in flight. */
  cancel() {
    clearTimeout(this.timer);
    this.waitingSince = null;
    this.sequence++;
    if (this.controller) this.controller.abort();
    this.controller = null;
  }
}

/** True when an answer to `query` has everything `visible` needs at its resolution. */
function covers(query, visible) {
  if (query.startPs > visible.startPs || query.endPs < visible.endPs) return false;
  const queryResolution = (query.endPs - query.startPs) / query.widthPx;
  const visibleResolution = (visible.endPs - visible.startPs) / visible.widthPx;
  if (Math.abs(queryResolution - visibleResolution) > visibleResolution * 0.01) return false;
  const have = new Set(query.tracks);
  return visible.tracks.every((id) => have.has(id));
}

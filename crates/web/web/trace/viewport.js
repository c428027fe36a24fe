// The visible time window and the only ways it changes: zoom around a point, pan,
// fit a range. Pure functions over `{startPs, endPs}`; the limits keep the window
// inside (a little beyond) the trace and no narrower than MIN_SPAN_PS.

/** The narrowest window the viewer zooms to: 1 ns across the whole timeline. */
export const MIN_SPAN_PS = 1000;

/** A window around the whole trace (what `0` resets to), with 1 % margins. */
export function fullWindow(trace) {
  const span = Math.max(MIN_SPAN_PS, trace.endPs - trace.startPs);
  return clampWindow(trace, { startPs: trace.startPs - span * 0.01, endPs: trace.endPs + span * 0.01 });
}

/**
 * `window` moved and narrowed into the allowed range: no narrower than MIN_SPAN_PS,
 * no wider than the trace plus 10 %, and never entirely outside the trace.
 */
export function clampWindow(trace, window) {
  const traceSpan = Math.max(MIN_SPAN_PS, trace.endPs - trace.startPs);
  const margin = traceSpan * 0.05;
  let span = window.endPs - window.startPs;
  if (!Number.isFinite(span) || span < MIN_SPAN_PS) span = MIN_SPAN_PS;
  span = Math.min(span, traceSpan + 2 * margin);
  let startPs = Number.isFinite(window.startPs) ? window.startPs : trace.startPs;
  const lowest = trace.startPs - margin;
  const highest = trace.endPs + margin - span;
  startPs = Math.min(Math.max(startPs, lowest), Math.max(lowest, highest));
  return { startPs, endPs: startPs + span };
}

/** Zooms by `factor` (< 1 zooms in) keeping the time at `anchor` (0…1 across) in place. */
export function zoomAround(trace, window, factor, anchor = 0.5) {
  const span = window.endPs - window.startPs;
  const anchorPs = window.startPs + span * anchor;
  const newSpan = Math.max(MIN_SPAN_PS, span * factor);
  return clampWindow(trace, { startPs: anchorPs - newSpan * anchor, endPs: anchorPs + newSpan * (1 - anchor) });
}

/** Moves the window by `fraction` of its width (positive = later in time). */
export function panBy(trace, window, fraction) {
  const shift = (window.endPs - window.startPs) * fraction;
  return clampWindow(trace, { startPs: window.startPs + shift, endPs: window.endPs + shift });
}

/**
 * A window showing [startPs, startPs + durPs] in its middle third (for instant or tiny
 * events, at least MIN_SPAN_PS wide).
 */
export function fitRange(trace, startPs, durPs) {
  const span = Math.max(MIN_SPAN_PS * 10, durPs * 3);
  const center = startPs + durPs / 2;
  return clampWindow(trace, { startPs: center - span / 2, endPs: center + span / 2 });
}

/**
 * A window with the current zoom centred on a range, or fitted to it when the range
 * is wider than 80 % of the current window (used to follow flows).
 */
export function centerOn(trace, window, startPs, durPs) {
  const span = window.endPs - window.startPs;
  if (durPs > span * 0.8) return fitRange(trace, startPs, durPs);
  const center = startPs + durPs / 2;
  return clampWindow(trace, { startPs: center - span / 2, endPs: center + span / 2 });
}

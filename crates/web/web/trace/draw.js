// Paints one frame of the timeline on a 2D canvas context already scaled to CSS
// pixels: the ruler, section headers, track labels, events, merged runs, flow arrows,
// the selected event and the marked range. It reads the scene and changes nothing.

import { LEVEL_HEIGHT, RULER_HEIGHT, TRACK_PADDING, levelCenter, rowsBetween } from './layout.js';
import { formatDuration } from '../lib/format.js';
import { colorForName } from './palette.js';
import { formatTime, rulerTicks } from './time.js';

const FONT = '11px system-ui, sans-serif';
const LABEL_FONT = '12px system-ui, sans-serif';
const HEADER_FONT = 'bold 12px system-ui, sans-serif';
/** Flow arrows are drawn only while there is at least this much timeline per arrow. */
const FLOW_SPACING_PX = 3;

/**
 * Draws `scene`: `{width, height, labelWidth, window: {startPs, endPs}, trace: {startPs,
 * endPs}, layout, scrollTop, store, counters, collapsed, selected, selectedFlows, mark,
 * stripes}`; `counters` maps a counter row's series key to its latest points.
 * Returns `{flowsHidden, flowsDrawn}`: how many flow arrows were too dense to draw (0:
 * all drawn) and how many were drawn.
 */
export function drawScene(ctx, scene) {
  const { width, height, labelWidth } = scene;
  const timelineWidth = Math.max(1, width - labelWidth);
  const psPerPx = (scene.window.endPs - scene.window.startPs) / timelineWidth;
  const xOf = (ps) => labelWidth + (ps - scene.window.startPs) / psPerPx;
  const yOf = (contentY) => RULER_HEIGHT + contentY - scene.scrollTop;
  const ruler = rulerTicks(scene.window.startPs, scene.window.endPs, timelineWidth);
  const view = { ...scene, timelineWidth, psPerPx, xOf, yOf, ruler };

  ctx.clearRect(0, 0, width, height);
  ctx.save();
  ctx.beginPath();
  ctx.rect(0, RULER_HEIGHT, width, height - RULER_HEIGHT);
  ctx.clip();
  const rows = rowsBetween(scene.layout, scene.scrollTop, scene.scrollTop + height - RULER_HEIGHT);
  for (const row of rows) {
    if (row.kind === 'section') drawSectionHeader(ctx, view, row);
    else if (row.kind === 'counter') drawCounter(ctx, view, row);
    else drawTrack(ctx, view, row);
  }
  drawOutsideTrace(ctx, view);
  const { flowsHidden, flowsDrawn } = drawFlows(ctx, view);
  drawSelection(ctx, view);
  drawMark(ctx, view, RULER_HEIGHT, height);
  ctx.restore();
  drawRuler(ctx, view);
  return { flowsHidden, flowsDrawn };
}

function drawSectionHeader(ctx, view, row) {
  const y = view.yOf(row.y);
  ctx.fillStyle = '#e3e7ef';
  ctx.fillRect(0, y, view.width, row.height);
  ctx.fillStyle = '#c5ccd8';
  ctx.fillRect(0, y + row.height - 1, view.width, 1);
  ctx.fillStyle = '#1d2633';
  ctx.font = HEADER_FONT;
  ctx.textBaseline = 'middle';
  const arrow = view.collapsed.has(row.sectionIndex) ? '▸' : '▾';
  const tracks = row.section.tracks.length;
  const label = `${arrow} ${row.section.name}  ·  ${tracks} track${tracks === 1 ? '' : 's'}`;
  ctx.fillText(label, 8, y + row.height / 2);
}

/**
 * A row's frame: its timeline background (alternating shades) with the ruler's grid,
 * the label column, the line under it; leaves the label font and colour set. Returns
 * the row's top on the canvas.
 */
function drawRowFrame(ctx, view, row) {
  const y = view.yOf(row.y);
  ctx.fillStyle = row.index % 2 === 1 ? '#f7f8fb' : '#ffffff';
  ctx.fillRect(view.labelWidth, y, view.timelineWidth, row.height);
  drawGrid(ctx, view, y, row.height);
  ctx.fillStyle = '#eef1f6';
  ctx.fillRect(0, y, view.labelWidth, row.height);
  ctx.fillStyle = '#dde2ea';
  ctx.fillRect(0, y + row.height - 1, view.width, 1);
  ctx.fillStyle = '#1d2633';
  ctx.font = LABEL_FONT;
  ctx.textBaseline = 'middle';
  return y;
}

function drawTrack(ctx, view, row) {
  const y = drawRowFrame(ctx, view, row);
  const label = fitText(ctx, row.track.name, view.labelWidth - 22);
  // The name stays in sight while a tall track is scrolled partly above the ruler.
  const labelY = Math.min(
    Math.max(y + TRACK_PADDING, RULER_HEIGHT + TRACK_PADDING) + LEVEL_HEIGHT / 2,
    y + row.height - LEVEL_HEIGHT / 2,
  );
  if (label) ctx.fillText(label, 16, labelY);

  const data = view.store.tracks.get(row.track.id);
  if (!data) return;
  ctx.save();
  ctx.beginPath();
  ctx.rect(view.labelWidth, y, view.timelineWidth, row.height);
  ctx.clip();
  const boxes = { view, left: view.labelWidth, right: view.width, top: y + TRACK_PADDING };
  drawBoxes(ctx, boxes, data.merged, data.mergedOrder, data.colors, 1);
  drawStripes(ctx, boxes, data.merged, data.stripeOrder, view.stripes);
  drawBoxes(ctx, boxes, data.events, data.eventOrder, data.colors, 0);
  drawNames(ctx, boxes, data);
  ctx.restore();
}

/** The key a counter series is known by: its group and name. */
export function counterKey(series) {
  return `${series.group}\u0000${series.name}`;
}

/**
 * A counter track: its name and group in the label column, its readings as a stepped
 * area (each holds until the next) scaled to the series' whole-profile range, each
 * pixel's least-to-greatest span drawn where readings changed within it.
 */
function drawCounter(ctx, view, row) {
  const y = drawRowFrame(ctx, view, row);
  const name = fitText(ctx, row.series.name, view.labelWidth - 22);
  if (name) ctx.fillText(name, 16, y + 12);
  ctx.fillStyle = '#5b6676';
  const group = fitText(ctx, row.series.group, view.labelWidth - 22);
  if (group) ctx.fillText(group, 16, y + 27);
  const data = view.counters.get(counterKey(row.series));
  if (!data || data.points.length === 0) return;
  const top = y + 3;
  const bottom = y + row.height - 3;
  const span = data.max - data.min || 1;
  const yOfValue = (value) => bottom - ((value - data.min) / span) * (bottom - top);
  ctx.save();
  ctx.beginPath();
  ctx.rect(view.labelWidth, y, view.timelineWidth, row.height);
  ctx.clip();
  const color = colorForName(row.series.name);
  ctx.beginPath();
  ctx.moveTo(Math.max(view.labelWidth, view.xOf(data.points[0][0])), bottom);
  let last = null;
  for (const [time, , , value] of data.points) {
    const x = Math.max(view.labelWidth - 1, view.xOf(time));
    if (last !== null) ctx.lineTo(x, yOfValue(last));
    ctx.lineTo(x, yOfValue(value));
    last = value;
  }
  const end = Math.min(view.width, view.xOf(view.trace.endPs));
  ctx.lineTo(end, yOfValue(last));
  ctx.lineTo(end, bottom);
  ctx.closePath();
  ctx.globalAlpha = 0.35;
  ctx.fillStyle = color;
  ctx.fill();
  ctx.globalAlpha = 1;
  ctx.fillStyle = color;
  for (const [time, least, greatest] of data.points) {
    if (greatest > least) ctx.fillRect(view.xOf(time), yOfValue(greatest), 1, yOfValue(least) - yOfValue(greatest));
  }
  ctx.restore();
}

/**
 * Fills `items` (events `[start, dur, depth, name, id]` or runs `[start, end, depth,
 * count, name]`; `endIsAbsolute` 1 for runs) in `order` (grouped by colour), setting
 * the fill once per colour and painting neighbouring boxes under 2 px as one rectangle:
 * a zoomed-out answer of thousands of sub-pixel items costs about one rectangle per pixel.
 */
function drawBoxes(ctx, boxes, items, order, colors, endIsAbsolute) {
  const { view, left, right, top } = boxes;
  const nameAt = endIsAbsolute ? 4 : 3;
  let color = -1;
  let runTop = 0;
  let runStart = 0;
  let runEnd = -Infinity;
  const flush = () => {
    if (runEnd > runStart) ctx.fillRect(runStart, runTop, runEnd - runStart, LEVEL_HEIGHT - 1);
    runEnd = -Infinity;
  };
  for (let i = 0; i < order.length; i++) {
    const item = items[order[i]];
    const start = view.xOf(item[0]);
    const end = view.xOf(endIsAbsolute ? item[1] : item[0] + item[1]);
    if (end < left || start > right) continue;
    if (item[nameAt] !== color) {
      flush();
      color = item[nameAt];
      ctx.fillStyle = colors[color];
    }
    const x0 = Math.max(left - 1, start);
    const x1 = Math.max(x0 + 1, Math.min(right + 1, end));
    const boxTop = top + item[2] * LEVEL_HEIGHT;
    if (x1 - x0 < 2 && boxTop === runTop && x0 <= runEnd + 0.5) {
      runEnd = Math.max(runEnd, x1);
      continue;
    }
    flush();
    runTop = boxTop;
    runStart = x0;
    runEnd = x1;
    if (x1 - x0 >= 2) flush();
  }
  flush();
}

/**
 * Lays the stripe pattern over the merged runs, visited by depth then start, painting
 * touching runs as one band: runs are about a pixel wide, so a busy stretch is one
 * rectangle instead of one per run.
 */
function drawStripes(ctx, boxes, runs, order, stripes) {
  const { view, left, right, top } = boxes;
  ctx.fillStyle = stripes;
  let bandTop = 0;
  let bandStart = 0;
  let bandEnd = -Infinity;
  const flush = () => {
    if (bandEnd > bandStart) ctx.fillRect(bandStart, bandTop, bandEnd - bandStart, LEVEL_HEIGHT - 1);
  };
  for (let i = 0; i < order.length; i++) {
    const run = runs[order[i]];
    const x0 = Math.max(left - 1, view.xOf(run[0]));
    const x1 = Math.max(x0 + 1, Math.min(right + 1, view.xOf(run[1])));
    if (x1 < left || x0 > right) continue;
    const runTop = top + run[2] * LEVEL_HEIGHT;
    if (runTop === bandTop && x0 <= bandEnd + 0.5) {
      bandEnd = Math.max(bandEnd, x1);
      continue;
    }
    flush();
    bandTop = runTop;
    bandStart = x0;
    bandEnd = x1;
  }
  flush();
}

/** Event names inside the boxes wide enough for a few characters. */
function drawNames(ctx, boxes, data) {
  const { view, left, right, top } = boxes;
  ctx.font = FONT;
  ctx.textBaseline = 'middle';
  ctx.fillStyle = '#10161f';
  const minPs = 18 * view.psPerPx;
  for (const event of data.events) {
    if (event[1] <= minPs) continue;
    const x0 = Math.max(left - 1, view.xOf(event[0]));
    const x1 = Math.min(right + 1, view.xOf(event[0] + event[1]));
    if (x1 - x0 <= 18) continue;
    const text = fitText(ctx, data.names[event[3]] ?? '', x1 - x0 - 6);
    if (text) ctx.fillText(text, x0 + 3, top + event[2] * LEVEL_HEIGHT + LEVEL_HEIGHT / 2);
  }
}

function drawGrid(ctx, view, y, height) {
  ctx.fillStyle = '#e8ebf0';
  for (const tick of view.ruler.ticks) {
    ctx.fillRect(Math.round(view.xOf(tick.ps)), y, 1, height);
  }
}

function drawOutsideTrace(ctx, view) {
  ctx.fillStyle = 'rgba(120, 128, 140, 0.12)';
  const before = view.xOf(view.trace.startPs);
  if (before > view.labelWidth) ctx.fillRect(view.labelWidth, RULER_HEIGHT, before - view.labelWidth, view.height);
  const after = view.xOf(view.trace.endPs);
  if (after < view.width) ctx.fillRect(Math.max(view.labelWidth, after), RULER_HEIGHT, view.width - after, view.height);
}

/** Content-y of an event on a track (its level's middle), or null for an unknown track. */
function eventY(view, trackId, depth) {
  const row = view.layout.byTrack.get(trackId);
  return row ? view.yOf(levelCenter(row, depth)) : null;
}

/**
 * Flow arrows: every flow of the latest view answer while there is room (fewer than
 * one per FLOW_SPACING_PX of timeline); where there are more, one arrow per
 * FLOW_SPACING_PX column of their starts, so they stay readable; then the selected
 * event's flows on top, always. Returns how many flows were left out (0: all drawn)
 * and how many drawn, as `{flowsHidden, flowsDrawn}`.
 */
function drawFlows(ctx, view) {
  ctx.save();
  ctx.beginPath();
  ctx.rect(view.labelWidth, RULER_HEIGHT, view.timelineWidth, view.height);
  ctx.clip();
  const arrows = [];
  for (const [fromId, fromTrack, fromPs, toId, toTrack, toPs] of view.store.flows) {
    const y0 = eventY(view, fromTrack, view.store.depthOf(fromId));
    const y1 = eventY(view, toTrack, view.store.depthOf(toId));
    if (y0 === null || y1 === null) continue;
    const x0 = view.xOf(fromPs);
    const x1 = view.xOf(toPs);
    if (Math.max(x0, x1) < view.labelWidth || Math.min(x0, x1) > view.width) continue;
    arrows.push([x0, y0, x1, y1]);
  }
  const drawn = arrows.length > view.timelineWidth / FLOW_SPACING_PX ? thinned(arrows) : arrows;
  const hidden = arrows.length - drawn.length;
  ctx.strokeStyle = 'rgba(40, 50, 70, 0.45)';
  ctx.fillStyle = 'rgba(40, 50, 70, 0.6)';
  ctx.lineWidth = 1;
  for (const [x0, y0, x1, y1] of drawn) drawArrow(ctx, x0, y0, x1, y1);
  const selected = view.selected;
  if (selected && view.selectedFlows.length > 0) {
    ctx.strokeStyle = 'rgba(200, 40, 40, 0.9)';
    ctx.fillStyle = 'rgba(200, 40, 40, 0.9)';
    ctx.lineWidth = 2;
    const here = eventY(view, selected.track, selected.depth);
    for (const flow of view.selectedFlows) {
      const there = eventY(view, flow.track, view.store.depthOf(flow.event));
      if (here === null || there === null) continue;
      const hereX = view.xOf(selected.start_ps);
      const thereX = view.xOf(flow.start_ps);
      if (flow.direction === 'in') drawArrow(ctx, thereX, there, hereX, here);
      else drawArrow(ctx, hereX, here, thereX, there);
    }
  }
  ctx.restore();
  return { flowsHidden: hidden, flowsDrawn: drawn.length };
}

/** One arrow per FLOW_SPACING_PX column of the arrows' starts (`[x0, y0, x1, y1]`): the first in each. */
function thinned(arrows) {
  const taken = new Set();
  const kept = [];
  for (const arrow of arrows) {
    const column = Math.floor(arrow[0] / FLOW_SPACING_PX);
    if (taken.has(column)) continue;
    taken.add(column);
    kept.push(arrow);
  }
  return kept;
}

function drawArrow(ctx, x0, y0, x1, y1) {
  const middle = (y0 + y1) / 2;
  ctx.beginPath();
  ctx.moveTo(x0, y0);
  if (Math.abs(y1 - y0) < 2) ctx.lineTo(x1, y1);
  else ctx.bezierCurveTo(x0, middle, x1, middle, x1, y1);
  ctx.stroke();
  const angle = Math.abs(y1 - y0) < 2 ? Math.atan2(0, x1 - x0) : y1 > y0 ? Math.PI / 2 : -Math.PI / 2;
  const size = 6;
  ctx.beginPath();
  ctx.moveTo(x1, y1);
  ctx.lineTo(x1 - size * Math.cos(angle - 0.45), y1 - size * Math.sin(angle - 0.45));
  ctx.lineTo(x1 - size * Math.cos(angle + 0.45), y1 - size * Math.sin(angle + 0.45));
  ctx.closePath();
  ctx.fill();
}

function drawSelection(ctx, view) {
  const selected = view.selected;
  if (!selected) return;
  const row = view.layout.byTrack.get(selected.track);
  if (!row || row.kind !== 'track') return;
  const x0 = view.xOf(selected.start_ps);
  const x1 = view.xOf(selected.start_ps + selected.dur_ps);
  if (x1 < view.labelWidth - 4 || x0 > view.width + 4) return;
  const top = view.yOf(row.y) + TRACK_PADDING + Math.max(0, selected.depth) * LEVEL_HEIGHT;
  ctx.save();
  ctx.beginPath();
  ctx.rect(view.labelWidth, RULER_HEIGHT, view.timelineWidth, view.height);
  ctx.clip();
  const left = Math.max(view.labelWidth - 2, x0) - 1;
  const boxWidth = Math.max(3, Math.min(view.width + 2, x1) - left + 1);
  ctx.lineWidth = 2;
  ctx.strokeStyle = '#000000';
  ctx.strokeRect(left, top - 1, boxWidth, LEVEL_HEIGHT + 1);
  ctx.lineWidth = 1;
  ctx.strokeStyle = '#ffffff';
  ctx.strokeRect(left + 1.5, top + 0.5, boxWidth - 3, LEVEL_HEIGHT - 2);
  ctx.restore();
}

function drawMark(ctx, view, top, bottom) {
  const mark = view.mark;
  if (!mark) return;
  const x0 = Math.max(view.labelWidth, view.xOf(mark.startPs));
  const x1 = Math.min(view.width, view.xOf(mark.endPs));
  if (x1 < view.labelWidth || x0 > view.width) return;
  ctx.fillStyle = 'rgba(50, 110, 220, 0.13)';
  ctx.fillRect(x0, top, Math.max(1, x1 - x0), bottom - top);
  ctx.fillStyle = 'rgba(30, 80, 200, 0.8)';
  ctx.fillRect(x0, top, 1, bottom - top);
  ctx.fillRect(x1, top, 1, bottom - top);
}

function drawRuler(ctx, view) {
  ctx.fillStyle = '#f3f5f8';
  ctx.fillRect(0, 0, view.width, RULER_HEIGHT);
  ctx.fillStyle = '#b9c1cc';
  ctx.fillRect(0, RULER_HEIGHT - 1, view.width, 1);
  ctx.fillRect(view.labelWidth - 1, 0, 1, RULER_HEIGHT);
  ctx.font = FONT;
  ctx.textBaseline = 'middle';
  ctx.fillStyle = '#3a4556';
  for (const tick of view.ruler.ticks) {
    const x = Math.round(view.xOf(tick.ps));
    ctx.fillRect(x, RULER_HEIGHT - 8, 1, 8);
    ctx.fillText(tick.label, x + 3, RULER_HEIGHT / 2 - 2);
  }
  ctx.fillStyle = '#eef1f6';
  ctx.fillRect(0, 0, view.labelWidth - 1, RULER_HEIGHT - 1);
  ctx.fillStyle = '#3a4556';
  const base = view.ruler.basePs === null ? 'time' : `${formatTime(view.ruler.basePs, view.ruler.stepPs)} +`;
  const baseText = fitText(ctx, base, view.labelWidth - 12);
  if (baseText) ctx.fillText(baseText, 8, RULER_HEIGHT / 2);
  const mark = view.mark;
  if (mark) {
    const x0 = Math.max(view.labelWidth, view.xOf(mark.startPs));
    const x1 = Math.min(view.width, view.xOf(mark.endPs));
    if (x1 >= view.labelWidth && x0 <= view.width) {
      ctx.fillStyle = 'rgba(30, 80, 200, 0.9)';
      ctx.fillRect(x0, RULER_HEIGHT - 5, Math.max(1, x1 - x0), 4);
      const label = formatDuration(mark.endPs - mark.startPs);
      ctx.font = HEADER_FONT;
      const labelWidth = ctx.measureText(label).width + 10;
      const center = Math.min(view.width - labelWidth / 2, Math.max(view.labelWidth + labelWidth / 2, (x0 + x1) / 2));
      ctx.fillRect(center - labelWidth / 2, 2, labelWidth, RULER_HEIGHT - 8);
      ctx.fillStyle = '#ffffff';
      ctx.fillText(label, center - labelWidth / 2 + 5, (RULER_HEIGHT - 6) / 2 + 1);
    }
  }
}

const textWidths = new Map();

/** `text` as drawn in at most `maxWidth` pixels with the context's font: whole, cut with '…', or null. */
export function fitText(ctx, text, maxWidth) {
  if (maxWidth < 8 || !text) return null;
  const key = `${ctx.font}\u0000${text}`;
  let full = textWidths.get(key);
  if (full === undefined) {
    full = ctx.measureText(text).width;
    if (textWidths.size > 50000) textWidths.clear();
    textWidths.set(key, full);
  }
  if (full <= maxWidth) return text;
  const chars = Math.floor((text.length * (maxWidth - 8)) / full);
  return chars >= 2 ? `${text.slice(0, chars)}…` : null;
}

/** A diagonal stripe pattern laid over merged runs so they read as "many events". */
export function stripePattern(ctx) {
  const tile = document.createElement('canvas');
  tile.width = 6;
  tile.height = 6;
  const tileCtx = tile.getContext('2d');
  tileCtx.strokeStyle = 'rgba(255, 255, 255, 0.6)';
  tileCtx.lineWidth = 1.5;
  tileCtx.beginPath();
  tileCtx.moveTo(-1, 7);
  tileCtx.lineTo(7, -1);
  tileCtx.moveTo(5, 7);
  tileCtx.lineTo(7, 5);
  tileCtx.moveTo(-1, 1);
  tileCtx.lineTo(1, -1);
  tileCtx.stroke();
  return ctx.createPattern(tile, 'repeat');
}

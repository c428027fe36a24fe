// Line charts over a numeric x axis with a left and an optional right y axis;
// hovering (or the arrow keys on the focused plot) picks the nearest point and
// shows its details; legend entries hide and show series.

import { s, h } from '../lib/dom.js';
import { chartWidth, redrawnOnResize, color, emptyChart, figure, hideTooltip, legend, linear, niceTicks, showTooltip, tickFormatter } from './common.js';

const HEIGHT = 320;
const MARGIN = { top: 14, right: 70, bottom: 44, left: 76 };

/**
 * A line chart.
 * - `x`: ascending x values; `xLabel` (with the unit); `xFormat` for its ticks (default: round numbers).
 * - `left`, `right` (optional): `{label, series: [{label, values, color?, hidden?}], max?, scale?}`;
 *   the label names the unit, ticks show `value / scale` (default 1).
 * - `details(i)`: tooltip lines for point i (strings or `[label, value, color]`).
 * - `steps`: draw each value as holding until the next point (counters such as memory in use).
 */
export function lineChart(options) {
  return redrawnOnResize(() => drawLineChart(options));
}

/** The chart at the current `chartWidth()`, drawn anew after each resize that changes it. */
function drawLineChart({ title, x, xLabel = '', xFormat = null, left, right = null, details, steps = false }) {
  if (x.length === 0) return emptyChart(title, 'No points.');
  const WIDTH = chartWidth();
  const axes = [left, right].filter(Boolean);
  let colorIndex = 0;
  const all = [];
  for (const axis of axes) {
    for (const one of axis.series) {
      all.push({ ...one, axis, color: one.color || color(colorIndex), shown: !one.hidden });
      colorIndex += 1;
    }
  }
  const xScale = linear([x[0], x[x.length - 1]], [MARGIN.left, WIDTH - MARGIN.right]);
  const svg = s('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: 'lines', role: 'group', 'aria-label': title });
  const plot = s('g');
  const guide = s('line', { class: 'guide', y1: MARGIN.top, y2: HEIGHT - MARGIN.bottom, visibility: 'hidden' });
  const dots = s('g', { class: 'dots' });
  const hit = s('rect', {
    x: MARGIN.left, y: MARGIN.top, width: WIDTH - MARGIN.left - MARGIN.right, height: HEIGHT - MARGIN.top - MARGIN.bottom,
    class: 'hit', tabindex: '0', role: 'img',
    'aria-label': `${title}: ${x.length} points; use the left and right arrow keys to step through them`,
  });
  svg.append(plot, guide, dots, hit);
  let scales = new Map();

  function draw() {
    plot.replaceChildren();
    scales = new Map();
    const bottom = HEIGHT - MARGIN.bottom;
    axes.forEach((axis, side) => {
      const visible = all.filter((one) => one.axis === axis && one.shown);
      const divisor = axis.scale || 1;
      const max = (axis.max ?? Math.max(0, ...visible.flatMap((one) => one.values))) / divisor;
      const ticks = niceTicks(0, max > 0 ? max : 1);
      const tickText = tickFormatter(ticks);
      const scale = linear([0, ticks[ticks.length - 1] * divisor], [bottom, MARGIN.top]);
      scales.set(axis, scale);
      const xText = side === 0 ? MARGIN.left - 6 : WIDTH - MARGIN.right + 6;
      for (const tick of ticks) {
        if (side === 0) plot.append(s('line', { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: scale(tick * divisor), y2: scale(tick * divisor), class: 'grid' }));
        plot.append(s('text', { x: xText, y: scale(tick * divisor), class: 'tick y', 'text-anchor': side === 0 ? 'end' : 'start', 'dominant-baseline': 'middle' }, tickText(tick)));
      }
      const titleX = side === 0 ? 14 : WIDTH - 8;
      plot.append(s('text', { class: 'axis-title', transform: `translate(${titleX} ${(bottom + MARGIN.top) / 2}) rotate(-90)`, 'text-anchor': 'middle' }, axis.label));
    });
    const xTicks = niceTicks(x[0], x[x.length - 1], 6).filter((t) => t >= x[0] && t <= x[x.length - 1]);
    const xText = xFormat || tickFormatter(xTicks);
    for (const tick of xTicks) {
      plot.append(s('text', { x: xScale(tick), y: bottom + 16, class: 'tick x', 'text-anchor': 'middle' }, xText(tick)));
    }
    plot.append(s('text', { x: (MARGIN.left + WIDTH - MARGIN.right) / 2, y: HEIGHT - 6, class: 'axis-title', 'text-anchor': 'middle' }, xLabel));
    plot.append(s('line', { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: bottom, y2: bottom, class: 'axis' }));
    for (const one of all.filter((o) => o.shown)) {
      const scale = scales.get(one.axis);
      const points = one.values.map((v, i) => {
        const here = `${xScale(x[i]).toFixed(2)},${scale(v).toFixed(2)}`;
        return steps && i + 1 < x.length ? `${here} ${xScale(x[i + 1]).toFixed(2)},${scale(v).toFixed(2)}` : here;
      }).join(' ');
      plot.append(s('polyline', { points, fill: 'none', stroke: one.color, class: 'series', 'stroke-dasharray': one.axis === right ? '5 3' : null }));
    }
  }

  let current = -1;
  function pick(index, pageX, pageY) {
    current = Math.max(0, Math.min(x.length - 1, index));
    const px = xScale(x[current]);
    guide.setAttribute('x1', px);
    guide.setAttribute('x2', px);
    guide.setAttribute('visibility', 'visible');
    dots.replaceChildren(...all.filter((o) => o.shown).map((one) => s('circle', { cx: px, cy: scales.get(one.axis)(one.values[current]), r: 3.5, fill: one.color })));
    showTooltip(details(current), pageX, pageY);
  }
  function release() {
    guide.setAttribute('visibility', 'hidden');
    dots.replaceChildren();
    hideTooltip();
  }
  hit.addEventListener('pointermove', (event) => {
    const box = svg.getBoundingClientRect();
    const vx = ((event.clientX - box.left) / box.width) * WIDTH;
    pick(nearest(x, xScale, vx), event.pageX, event.pageY);
  });
  hit.addEventListener('pointerleave', release);
  hit.addEventListener('blur', release);
  hit.addEventListener('keydown', (event) => {
    const step = { ArrowRight: 1, ArrowLeft: -1, End: x.length, Home: -x.length }[event.key];
    if (step === undefined) return;
    event.preventDefault();
    const box = hit.getBoundingClientRect();
    pick(current < 0 ? 0 : current + step, box.left + window.scrollX + box.width / 2, box.top + window.scrollY);
  });

  draw();
  const items = all.map((one) => ({ label: one.axis === right ? `${one.label} (right axis)` : one.label, color: one.color, hidden: !one.shown }));
  const legendNode = legend(items, { onToggle: (i, shown) => { all[i].shown = shown; draw(); } });
  return figure(title, h('div', { class: 'lines-body' }, svg, legendNode));
}

/** The index of the x value drawn nearest to the view-box x coordinate `vx`. */
function nearest(x, xScale, vx) {
  let lo = 0;
  let hi = x.length - 1;
  while (hi - lo > 1) {
    const mid = (lo + hi) >> 1;
    if (xScale(x[mid]) < vx) lo = mid;
    else hi = mid;
  }
  return Math.abs(xScale(x[lo]) - vx) <= Math.abs(xScale(x[hi]) - vx) ? lo : hi;
}

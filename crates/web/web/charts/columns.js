// Stacked column charts: one column per x category (a step, a worker), one
// coloured segment per series, hover details per column.

import { s, h } from '../lib/dom.js';
import { chartWidth, redrawnOnResize, color, emptyChart, figure, hoverDetails, legend, linear, niceTicks, tickFormatter } from './common.js';

const HEIGHT = 300;
const MARGIN = { top: 12, right: 16, bottom: 48, left: 64 };

/**
 * A stacked column chart.
 * - `columns`: x labels; `series`: `[{label, values, color?}]`, `values[i]` for column i.
 * - `yLabel`: the y axis title (with the unit; ticks are plain numbers); `xLabel`: the x axis title;
 *   `format(value)` the values' text in tooltips.
 * - `details(i)`: extra tooltip lines for column i (after the series values).
 * Series that are zero everywhere are left out of the chart and the legend.
 */
export function stackedColumns(options) {
  return redrawnOnResize(() => drawStackedColumns(options));
}

/** The chart at the current `chartWidth()`, drawn anew after each resize that changes it. */
function drawStackedColumns({ title, columns, series, yLabel = '', xLabel = '', format = String, details = () => [], empty = 'Nothing to show.' }) {
  const drawn = series.map((one, i) => ({ ...one, color: one.color || color(i) }))
    .filter((one) => one.values.some((v) => v > 0));
  const totals = columns.map((_, i) => drawn.reduce((sum, one) => sum + Math.max(0, one.values[i] || 0), 0));
  const max = Math.max(0, ...totals);
  if (columns.length === 0 || max <= 0) return emptyChart(title, empty);

  const WIDTH = chartWidth();
  const ticks = niceTicks(0, max);
  const tickText = tickFormatter(ticks);
  const top = ticks[ticks.length - 1];
  const y = linear([0, top], [HEIGHT - MARGIN.bottom, MARGIN.top]);
  const plotWidth = WIDTH - MARGIN.left - MARGIN.right;
  const band = plotWidth / columns.length;
  const barWidth = Math.max(1, Math.min(band * 0.7, 64));
  const svg = s('svg', { viewBox: `0 0 ${WIDTH} ${HEIGHT}`, class: 'columns', role: 'group', 'aria-label': title });

  for (const tick of ticks) {
    svg.append(s('line', { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(tick), y2: y(tick), class: 'grid' }),
      s('text', { x: MARGIN.left - 6, y: y(tick), class: 'tick y', 'text-anchor': 'end', 'dominant-baseline': 'middle' }, tickText(tick)));
  }
  if (yLabel) {
    svg.append(s('text', { class: 'axis-title', transform: `translate(14 ${(HEIGHT - MARGIN.bottom + MARGIN.top) / 2}) rotate(-90)`, 'text-anchor': 'middle' }, yLabel));
  }
  if (xLabel) {
    svg.append(s('text', { class: 'axis-title', x: MARGIN.left + plotWidth / 2, y: HEIGHT - 8, 'text-anchor': 'middle' }, xLabel));
  }
  const labelEvery = Math.ceil(columns.length / Math.floor(plotWidth / 56));
  columns.forEach((label, i) => {
    const x = MARGIN.left + band * i + (band - barWidth) / 2;
    const group = s('g', { class: 'column' });
    let base = 0;
    for (const one of drawn) {
      const value = Math.max(0, one.values[i] || 0);
      if (value <= 0) continue;
      group.append(s('rect', { x, width: barWidth, y: y(base + value), height: Math.max(0.5, y(base) - y(base + value)), fill: one.color }));
      base += value;
    }
    const hit = s('rect', { x: MARGIN.left + band * i, width: band, y: MARGIN.top, height: HEIGHT - MARGIN.bottom - MARGIN.top, class: 'hit' });
    hoverDetails(hit, `${label}: ${format(totals[i])}`, () => [
      String(label),
      ...drawn.filter((one) => (one.values[i] || 0) > 0).map((one) => [one.label, format(one.values[i]), one.color]),
      ['Total', format(totals[i])],
      ...details(i),
    ]);
    group.append(hit);
    if (i % labelEvery === 0) {
      group.append(s('text', { x: MARGIN.left + band * (i + 0.5), y: HEIGHT - MARGIN.bottom + 16, class: 'tick x', 'text-anchor': 'middle' }, shorten(String(label), Math.max(4, Math.floor((band * labelEvery) / 7)))));
    }
    svg.append(group);
  });
  svg.append(s('line', { x1: MARGIN.left, x2: WIDTH - MARGIN.right, y1: y(0), y2: y(0), class: 'axis' }));
  return figure(title, h('div', { class: 'columns-body' }, svg, legend(drawn.map((one) => ({ label: one.label, color: one.color })))));
}

function shorten(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

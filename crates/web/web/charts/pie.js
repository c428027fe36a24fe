// Pie charts: the largest slices by value, the rest merged into "Other" (as the TF
// Profiler's pies do), a legend with shares, and hover details per slice.

import { s, h } from '../lib/dom.js';
import { formatPercent } from '../lib/format.js';
import { OTHER_COLOR, color, emptyChart, figure, hoverDetails, legend } from './common.js';

/**
 * Groups `slices` (`{label, value}`) into at most `maxSlices`: the largest first,
 * the remainder summed into one "Other" slice. Zero and negative values are dropped.
 */
export function topSlices(slices, maxSlices = 10) {
  const positive = slices.filter((slice) => slice.value > 0).sort((a, b) => b.value - a.value);
  if (positive.length <= maxSlices) return positive;
  const kept = positive.slice(0, maxSlices - 1);
  const rest = positive.slice(maxSlices - 1);
  return [...kept, { label: `Other (${rest.length})`, value: rest.reduce((sum, slice) => sum + slice.value, 0), other: true }];
}

/** Sums `value(item)` per `key(item)`, as `[{label, value}]`. */
export function groupSum(items, key, value) {
  const sums = new Map();
  for (const item of items) sums.set(key(item), (sums.get(key(item)) || 0) + value(item));
  return [...sums].map(([label, total]) => ({ label, value: total }));
}

/**
 * A pie chart.
 * - `slices`: `[{label, value}]`; `format(value)` is the value's text.
 * - `maxSlices`: slices shown before "Other".
 * One slice is said in a sentence, not drawn as a full circle.
 */
export function pieChart({ title, slices, format = String, maxSlices = 10, empty = 'Nothing to show.' }) {
  const shown = topSlices(slices, maxSlices);
  const total = shown.reduce((sum, slice) => sum + slice.value, 0);
  if (total <= 0) return emptyChart(title, empty);
  if (shown.length === 1) {
    return figure(title, h('p', { class: 'chart-single' }, `All of it is ${shown[0].label} (${format(shown[0].value)}).`), { className: 'pie-chart' });
  }
  const radius = 90;
  const svg = s('svg', { viewBox: '-100 -100 200 200', class: 'pie', role: 'group', 'aria-label': title });
  let angle = -Math.PI / 2;
  const colors = shown.map((slice, i) => (slice.other ? OTHER_COLOR : color(i)));
  shown.forEach((slice, i) => {
    const share = slice.value / total;
    const sweep = share * 2 * Math.PI;
    const mark = shown.length === 1
      ? s('circle', { r: radius, cx: 0, cy: 0, fill: colors[i] })
      : s('path', { d: arc(radius, angle, angle + sweep), fill: colors[i] });
    angle += sweep;
    const percent = formatPercent(share * 100);
    hoverDetails(mark, `${slice.label}: ${format(slice.value)} (${percent})`,
      () => [slice.label, ['Value', format(slice.value)], ['Share', percent]]);
    svg.append(mark);
  });
  const items = shown.map((slice, i) => ({ label: slice.label, color: colors[i], note: formatPercent((slice.value / total) * 100) }));
  return figure(title, h('div', { class: 'pie-body' }, svg, legend(items, { className: 'pie-legend' })), { className: 'pie-chart' });
}

function arc(radius, from, to) {
  const x0 = radius * Math.cos(from);
  const y0 = radius * Math.sin(from);
  const x1 = radius * Math.cos(to);
  const y1 = radius * Math.sin(to);
  const large = to - from > Math.PI ? 1 : 0;
  return `M0 0 L${x0.toFixed(3)} ${y0.toFixed(3)} A${radius} ${radius} 0 ${large} 1 ${x1.toFixed(3)} ${y1.toFixed(3)} Z`;
}

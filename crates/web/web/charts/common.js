// What the charts share: colours, linear scales with round ticks, the tooltip,
// and the legend.

import { h, clear } from '../lib/dom.js';

/** Categorical colours, distinguishable on white (the charts cycle through them). */
export const PALETTE = [
  '#4285f4', '#db4437', '#f4b400', '#0f9d58', '#ab47bc', '#00acc1',
  '#ff7043', '#9e9d24', '#5c6bc0', '#f06292', '#00796b', '#8d6e63',
];

/** The grey of an "Other" slice. */
export const OTHER_COLOR = '#bdbdbd';

/** The `i`-th palette colour. */
export function color(i) {
  return PALETTE[i % PALETTE.length];
}

/** A linear map from `[d0, d1]` to `[r0, r1]`. */
export function linear([d0, d1], [r0, r1]) {
  const span = d1 - d0 || 1;
  return (value) => r0 + ((value - d0) / span) * (r1 - r0);
}

/**
 * About `count` round tick values from `min` to at least `max` (steps of 1, 2 or 5
 * times a power of ten); the last tick is the axis end.
 */
export function niceTicks(min, max, count = 5) {
  if (!(max > min)) max = min + 1;
  const raw = (max - min) / count;
  const power = 10 ** Math.floor(Math.log10(raw));
  const step = [1, 2, 5, 10].map((m) => m * power).find((s) => s >= raw) || raw;
  const start = Math.floor(min / step) * step;
  const ticks = [];
  for (let t = start; t < max + step * 0.999; t += step) ticks.push(Number(t.toPrecision(12)));
  return ticks;
}

/** Formats tick values with as many decimals as the tick step needs (`0`, `0.5`, `1`). */
export function tickFormatter(ticks) {
  const step = ticks.length > 1 ? Math.abs(ticks[1] - ticks[0]) : 1;
  const decimals = Math.max(0, Math.min(6, -Math.floor(Math.log10(step) + 1e-9)));
  const formatter = new Intl.NumberFormat('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
  return (value) => formatter.format(value);
}

let tooltipNode = null;

function tooltip() {
  if (!tooltipNode || !tooltipNode.isConnected) {
    tooltipNode = h('div', { class: 'chart-tooltip', role: 'tooltip', hidden: true });
    document.body.append(tooltipNode);
  }
  return tooltipNode;
}

/**
 * Shows the tooltip with `lines` (the first one bold) near the page point
 * (`x`, `y`); `lines` items are strings or `[label, value, color?]` rows.
 */
export function showTooltip(lines, x, y) {
  const tip = tooltip();
  clear(tip);
  lines.forEach((line, i) => {
    if (Array.isArray(line)) {
      const [label, value, swatch] = line;
      tip.append(h('div', { class: 'tip-row' },
        swatch ? h('span', { class: 'swatch', style: { background: swatch } }) : null,
        h('span', { class: 'tip-label' }, label), h('span', { class: 'tip-value' }, value)));
    } else {
      tip.append(h('div', { class: i === 0 ? 'tip-title' : 'tip-line' }, line));
    }
  });
  tip.hidden = false;
  const { innerWidth, innerHeight, scrollX, scrollY } = window;
  const box = tip.getBoundingClientRect();
  const left = Math.min(x + 14, scrollX + innerWidth - box.width - 8);
  const top = y + 14 + box.height > scrollY + innerHeight ? y - box.height - 10 : y + 14;
  tip.style.left = `${Math.max(scrollX + 4, left)}px`;
  tip.style.top = `${Math.max(scrollY + 4, top)}px`;
}

/** Hides the tooltip. */
export function hideTooltip() {
  if (tooltipNode) tooltipNode.hidden = true;
}

/**
 * Makes `node` (an SVG mark) show `lines()` on hover and on keyboard focus; it gets
 * `label` as its accessible name.
 */
export function hoverDetails(node, label, lines) {
  node.setAttribute('tabindex', '0');
  node.setAttribute('role', 'img');
  node.setAttribute('aria-label', label);
  node.classList.add('mark');
  node.addEventListener('pointermove', (event) => showTooltip(lines(), event.pageX, event.pageY));
  node.addEventListener('pointerleave', hideTooltip);
  node.addEventListener('focus', () => {
    const box = node.getBoundingClientRect();
    showTooltip(lines(), box.left + window.scrollX + box.width / 2, box.top + window.scrollY + box.height / 2);
  });
  node.addEventListener('blur', hideTooltip);
  return node;
}

/**
 * A legend: one entry per `{label, color}`; with `onToggle(index, shown)` the
 * entries are buttons that hide and show their series.
 */
export function legend(items, { onToggle = null, className = '' } = {}) {
  return h('ul', { class: `legend ${className}`.trim() }, items.map((item, i) => {
    const content = [h('span', { class: 'swatch', style: { background: item.color } }), h('span', { class: 'legend-label' }, item.label),
      item.note ? h('span', { class: 'legend-note' }, item.note) : null];
    if (!onToggle) return h('li', { title: item.label }, content);
    const button = h('button', {
      type: 'button', 'aria-pressed': item.hidden ? 'false' : 'true', title: `Show or hide ${item.label}`,
      onClick: () => {
        const shown = button.getAttribute('aria-pressed') !== 'true';
        button.setAttribute('aria-pressed', String(shown));
        onToggle(i, shown);
      },
    }, content);
    return h('li', {}, button);
  }));
}

/** A figure with a caption (the chart's accessible name) around `body`. */
export function figure(title, body, { className = '' } = {}) {
  return h('figure', { class: `chart ${className}`.trim() }, title ? h('figcaption', {}, title) : null, body);
}

/**
 * The width (CSS px) a full-width chart is drawn at: the page's content width when it is
 * drawn (and again after a resize, see `redrawnOnResize`), between 760 and 1600, so its
 * text stays at its size on wide screens instead of the chart stopping at a fixed width
 * or growing tall.
 */
export function chartWidth() {
  const main = document.querySelector('main');
  // The page's padding and a card's padding and border.
  const width = main ? main.clientWidth - 90 : 760;
  return Math.round(Math.min(1600, Math.max(760, width)));
}

/** The draw function of each chart drawn through `redrawnOnResize` (its width is in its `data-drawn-width`). */
const redraws = new WeakMap();
/** Whether the window's resize events are listened to yet. */
let listening = false;
let redrawTimer = 0;

/**
 * `draw()`'s chart, drawn again by `draw` when a window resize changes `chartWidth()`
 * (150 ms after the last resize event), so its text keeps its size rather than the SVG
 * scaling with the window. Hover and legend choices start afresh on the new chart.
 */
export function redrawnOnResize(draw) {
  const chart = draw();
  remember(chart, draw);
  if (!listening) {
    listening = true;
    window.addEventListener('resize', () => {
      clearTimeout(redrawTimer);
      redrawTimer = setTimeout(redrawResized, 150);
    });
  }
  return chart;
}

function remember(chart, draw) {
  chart.dataset.redraw = '';
  chart.dataset.drawnWidth = String(chartWidth());
  redraws.set(chart, draw);
}

function redrawResized() {
  const width = String(chartWidth());
  for (const chart of document.querySelectorAll('[data-redraw]')) {
    const draw = redraws.get(chart);
    if (!draw || chart.dataset.drawnWidth === width) continue;
    const next = draw();
    remember(next, draw);
    chart.replaceWith(next);
  }
}

/** The text shown instead of a chart with nothing to draw. */
export function emptyChart(title, message) {
  return figure(title, h('p', { class: 'chart-empty' }, message));
}

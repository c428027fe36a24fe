// Key figures (a label over a large value) and label/value property lists.

import { h } from '../lib/dom.js';

/**
 * A grid of key figures: `[{label, text, value?, tone?}]`; `value` (the exact
 * number behind `text`) goes into `data-value` and `tone` is `highlight` or `bad`.
 */
export function keyFigures(items, { id = null } = {}) {
  return h('dl', { class: 'stats', id }, items.map((item) => h('div', { class: `stat ${item.tone || ''}`.trim() },
    h('dt', {}, item.label),
    h('dd', { 'data-value': item.value ?? null, title: item.title || null }, item.text))));
}

/** A two-column list of `[label, text]` pairs. */
export function properties(pairs, { id = null } = {}) {
  return h('dl', { class: 'properties', id }, pairs.flatMap(([label, text]) => [h('dt', {}, label), h('dd', {}, text)]));
}

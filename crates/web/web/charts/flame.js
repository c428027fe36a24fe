// An icicle (a flame graph drawn top down) of a call tree `{name, file, line, self,
// total, children}` as SVG: one row per stack depth, each frame as wide as its total
// samples. Zoomed into a frame, that frame spans the width, its callers stay above it
// as full-width bars (click one to zoom out to it) and its callees below it. Hover or
// keyboard focus shows a frame's function, file:line, self and total samples.
//
// Colour is by file: a stable hash of the file name picks the hue, so one module's
// frames read as one colour everywhere in the graph and keep it across threads, steps
// and reloads — width already says how many samples a frame has, so colour answers
// the other question, whose code it is. Merged small frames `(other)` are grey.

import { s } from '../lib/dom.js';
import { hideTooltip, showTooltip } from './common.js';

/** Height of a row, px. */
const ROW = 18;
/** Frames narrower than this (px) are not drawn, nor their callees. */
const MIN_WIDTH = 0.5;
/** Frames at least this wide (px) get a label and a tab stop. */
const LABEL_WIDTH = 28;
/** Width of a label character at the graph's 11 px font, px (an estimate for clipping). */
const CHAR_WIDTH = 6.7;

/** The fill of frames of `file` (grey for the root and `(other)`). */
export function fileColor(file) {
  if (!file) return '#d6d6d6';
  let hash = 2166136261;
  for (let i = 0; i < file.length; i += 1) {
    hash ^= file.charCodeAt(i);
    hash = Math.imul(hash, 16777619);
  }
  return `hsl(${(hash >>> 0) % 360}, 62%, 80%)`;
}

/** `text` cut to `width` px with an ellipsis, or `''` when nothing fits. */
function fit(text, width) {
  const room = Math.floor((width - 6) / CHAR_WIDTH);
  if (room < 2) return '';
  return text.length <= room ? text : `${text.slice(0, room - 1)}…`;
}

/** The frame as one line: `function (file:line)`. */
export function frameLabel(node) {
  return node.file ? `${node.name} (${node.file}:${node.line})` : node.name;
}

/**
 * Draws `path` (the nodes from the root to the focused frame) into an SVG of `width`
 * px. `details(node)` gives the tooltip lines; `onZoom(depth, node)` runs when a frame
 * is clicked or chosen with Enter (its depth from the root and the node; the path's
 * own nodes zoom out). Returns the SVG.
 */
export function flameGraph({ path, width, details, onZoom, title }) {
  const focus = path[path.length - 1];
  const scale = focus.total > 0 ? width / focus.total : 0;
  const marks = s('g');
  const nodes = new Map();
  let rows = path.length;

  function mark(node, depth, x, w, className) {
    const label = fit(node.name, w);
    const group = s('g', { class: `flame-node ${className}`.trim(), transform: `translate(${x.toFixed(2)} ${depth * ROW})` },
      s('rect', { width: Math.max(w - 1, 0.5).toFixed(2), height: ROW - 1, fill: node.name === '(other)' ? '#c8c8c8' : fileColor(node.file) }),
      label ? s('text', { x: 4, y: ROW - 5 }, label) : null);
    group.setAttribute('aria-label', frameLabel(node));
    if (w >= LABEL_WIDTH) group.setAttribute('tabindex', '0');
    nodes.set(group, { node, depth });
    marks.append(group);
  }

  // The callers: full width, dimmed, above the focused frame.
  path.forEach((node, depth) => mark(node, depth, 0, width, depth < path.length - 1 ? 'caller' : 'focus'));
  // The callees, each child from its parent's left edge on.
  const stack = [[focus, path.length - 1, 0]];
  while (stack.length) {
    const [node, depth, left] = stack.pop();
    let x = left;
    for (const child of node.children) {
      const w = child.total * scale;
      if (w >= MIN_WIDTH) {
        mark(child, depth + 1, x, w, '');
        rows = Math.max(rows, depth + 2);
        stack.push([child, depth + 1, x]);
      }
      x += w;
    }
  }

  const height = rows * ROW;
  const svg = s('svg', { class: 'flame', viewBox: `0 0 ${width} ${height}`, width, height, role: 'group', 'aria-label': title }, marks);
  const hit = (event) => {
    const group = event.target instanceof Element ? event.target.closest('g.flame-node') : null;
    return group ? { group, ...nodes.get(group) } : null;
  };
  svg.addEventListener('pointermove', (event) => {
    const found = hit(event);
    if (found) showTooltip(details(found.node), event.pageX, event.pageY);
    else hideTooltip();
  });
  svg.addEventListener('pointerleave', hideTooltip);
  svg.addEventListener('click', (event) => {
    const found = hit(event);
    if (found) onZoom(found.depth, found.node);
  });
  svg.addEventListener('keydown', (event) => {
    const found = hit(event);
    if (found && (event.key === 'Enter' || event.key === ' ')) {
      event.preventDefault();
      onZoom(found.depth, found.node);
    }
  });
  svg.addEventListener('focusin', (event) => {
    const found = hit(event);
    if (!found) return;
    const box = found.group.getBoundingClientRect();
    showTooltip(details(found.node), box.left + window.scrollX + Math.min(box.width / 2, 60), box.top + window.scrollY + ROW / 2);
  });
  svg.addEventListener('focusout', hideTooltip);
  return svg;
}

// A top-down tree drawing: boxes with two lines of text joined by edges, each node
// and edge optionally marked (`blocking` draws bold, `bottleneck` red), with hover
// details. Used for the tf.data iterator graph.

import { s, h } from '../lib/dom.js';
import { figure, hoverDetails } from './common.js';

const BOX_W = 200;
const BOX_H = 44;
const GAP_X = 24;
const GAP_Y = 36;
const PAD = 8;

/**
 * Draws `root`, a node `{title, subtitle, classes: [], label, details(), children: []}`;
 * `classes` mark the node and the edge into it.
 */
export function treeGraph({ title, root, legendItems = [] }) {
  let slot = 0;
  let depthMax = 0;
  const placed = [];
  function place(node, depth) {
    depthMax = Math.max(depthMax, depth);
    const children = node.children || [];
    let x;
    if (children.length === 0) {
      x = slot;
      slot += 1;
    } else {
      const xs = children.map((child) => place(child, depth + 1));
      x = (xs[0] + xs[xs.length - 1]) / 2;
    }
    placed.push({ node, x, depth });
    node.position = { x, depth };
    return x;
  }
  place(root, 0);
  const left = (x) => PAD + x * (BOX_W + GAP_X);
  const top = (depth) => PAD + depth * (BOX_H + GAP_Y);
  const width = PAD * 2 + slot * BOX_W + (slot - 1) * GAP_X;
  const height = PAD * 2 + (depthMax + 1) * BOX_H + depthMax * GAP_Y;
  const svg = s('svg', { viewBox: `0 0 ${width} ${height}`, width, height, role: 'group', 'aria-label': title });
  const edges = s('g');
  const nodes = s('g');
  for (const { node, x, depth } of placed) {
    for (const child of node.children || []) {
      const x1 = left(x) + BOX_W / 2;
      const y1 = top(depth) + BOX_H;
      const x2 = left(child.position.x) + BOX_W / 2;
      const y2 = top(child.position.depth);
      const mid = (y1 + y2) / 2;
      edges.append(s('path', { d: `M${x1} ${y1} C${x1} ${mid} ${x2} ${mid} ${x2} ${y2}`, class: ['edge', ...(child.classes || [])].join(' ') }));
    }
    const group = s('g', { class: ['node', ...(node.classes || [])].join(' '), transform: `translate(${left(x)} ${top(depth)})` },
      s('rect', { width: BOX_W, height: BOX_H, rx: 5 }),
      s('text', { x: 10, y: 18, class: 'name' }, clip(node.title, 26)),
      s('text', { x: 10, y: 34 }, clip(node.subtitle || '', 32)));
    hoverDetails(group, node.label || node.title, node.details || (() => [node.title]));
    nodes.append(group);
  }
  svg.append(edges, nodes);
  const legend = legendItems.length
    ? h('ul', { class: 'legend graph-legend' }, legendItems.map((item) => h('li', {}, h('span', { class: `key ${item.className}` }), item.label)))
    : null;
  return figure(title, h('div', { class: 'graph' }, h('div', { class: 'graph-scroll' }, svg), legend));
}

function clip(text, max) {
  return text.length > max ? `${text.slice(0, max - 1)}…` : text;
}

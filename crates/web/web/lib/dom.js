// Building DOM nodes without innerHTML: every text a profile supplies goes in as text.

const SVG_NS = 'http://www.w3.org/2000/svg';

/**
 * Creates an HTML element.
 * `attrs`: attributes; `class` may be a string, `on*` functions become listeners,
 * `dataset` and `style` objects (styles are set through the CSSOM: the server's
 * Content-Security-Policy forbids `style="…"` attributes); `null`/`false` values are skipped.
 * `children`: nodes, strings (as text) or nested arrays; `null`/`false` are skipped.
 */
export function h(tag, attrs = {}, ...children) {
  return fill(document.createElement(tag), attrs, children);
}

/** Creates an SVG element (same rules as `h`). */
export function s(tag, attrs = {}, ...children) {
  return fill(document.createElementNS(SVG_NS, tag), attrs, children);
}

function fill(node, attrs, children) {
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (key.startsWith('on') && typeof value === 'function') {
      node.addEventListener(key.slice(2).toLowerCase(), value);
    } else if (key === 'dataset') {
      Object.assign(node.dataset, value);
    } else if (key === 'style') {
      Object.assign(node.style, value);
    } else {
      node.setAttribute(key, value === true ? '' : String(value));
    }
  }
  append(node, children);
  return node;
}

/** Appends children (nodes, strings, arrays; nullish and `false` skipped). */
export function append(node, children) {
  for (const child of [children].flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

/** Removes every child of `node`. */
export function clear(node) {
  node.replaceChildren();
  return node;
}

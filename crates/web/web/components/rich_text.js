// Sentences from the analyses: plain text with `code` in backticks, and (in
// XProf's recommendation strings) <a href="…">links</a>. Nothing is parsed as HTML:
// links become anchors built here, any other markup stays visible as text. A command
// that names a tool (`mlprof analyze --tool transfers`, `--tool steps`) is what a
// terminal user runs; here it becomes a link to that tool's page for the same run.

import { h } from '../lib/dom.js';
import { toolLabel, toolSpec } from '../pages/registry.js';

const LINK = /<a\s+[^>]*?href="([^"]*)"[^>]*>(.*?)<\/a>/gi;

/** The nodes for one sentence. */
export function richText(text) {
  const nodes = [];
  let last = 0;
  for (const match of String(text).matchAll(LINK)) {
    nodes.push(...codeSpans(text.slice(last, match.index)));
    const [, href, label] = match;
    nodes.push(/^https?:\/\//.test(href)
      ? h('a', { href, target: '_blank', rel: 'noopener noreferrer' }, stripTags(label))
      : stripTags(label));
    last = match.index + match[0].length;
  }
  nodes.push(...codeSpans(text.slice(last)));
  return nodes;
}

function codeSpans(text) {
  return text.split('`').map((part, i) => (i % 2 === 1 ? code(part) : part)).filter((n) => n !== '');
}

/** A code span: a link to the tool's page when it is a command naming a tool the page knows. */
function code(text) {
  const tool = /(?:^|\s)--tool\s+([a-z_]+)/.exec(text);
  if (!tool || !toolSpec(tool[1])) return h('code', {}, text);
  const here = new URLSearchParams(window.location.search);
  const params = new URLSearchParams();
  for (const key of ['run', 'host']) if (here.get(key)) params.set(key, here.get(key));
  params.set('tool', tool[1]);
  return h('a', { href: `?${params}`, class: 'tool-link', title: text }, `the ${toolLabel(tool[1])} page`);
}

function stripTags(text) {
  return text.replace(/<[^>]*>/g, '');
}

/** A paragraph per sentence. */
export function notesBlock(notes, className = 'notes') {
  if (!notes || notes.length === 0) return null;
  return h('div', { class: className }, notes.map((note) => h('p', {}, richText(note))));
}

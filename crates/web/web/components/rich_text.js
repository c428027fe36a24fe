// Sentences from the analyses: plain text with `code` in backticks, and (in
// XProf's recommendation strings) <a href="…">links</a>. Nothing is parsed as HTML:
// links become anchors built here, any other markup stays visible as text.

import { h } from '../lib/dom.js';

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
  return text.split('`').map((part, i) => (i % 2 === 1 ? h('code', {}, part) : part)).filter((n) => n !== '');
}

function stripTags(text) {
  return text.replace(/<[^>]*>/g, '');
}

/** A paragraph per sentence. */
export function notesBlock(notes, className = 'notes') {
  if (!notes || notes.length === 0) return null;
  return h('div', { class: className }, notes.map((note) => h('p', {}, richText(note))));
}

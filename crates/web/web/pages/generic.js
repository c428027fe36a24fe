// The page of a tool without its own: every report section as a card.

import { append } from '../lib/dom.js';
import { remainingSections } from '../components/report_view.js';

/** Renders `answer.report` section by section. */
export function render(root, answer, ctx) {
  append(root, [...remainingSections(answer.report, ctx)]);
}

// The range pane under the timeline: what a marked range (Shift+drag, or M on an
// event) holds on the tracks it covers, by event name — count, time inside the range,
// self time, average and longest — from /api/trace/aggregate, as Perfetto's area
// selection shows it; sortable by any column, and exported whole as CSV by the server.

import { h } from '../lib/dom.js';
import { formatCount, formatDuration } from '../lib/format.js';
import { isAbort } from './api.js';
import { formatTime } from './time.js';

/** How long a mark must rest (ms) before its totals are asked for (a drag moves it on every pointer move). */
const SETTLE_MS = 120;
/** Rows the pane asks for; the CSV export has every row. */
const ROWS = 1000;

/** The table's columns: [header, row field, is it a time]. */
const COLUMNS = [
  ['Name', 'name', false],
  ['Count', 'count', false],
  ['Total', 'total_ps', true],
  ['Self', 'self_ps', true],
  ['Average', 'average_ps', true],
  ['Longest', 'max_ps', true],
];

/** Renders into `element`; `api` is the viewer's TraceApi, `trackName(id)` names a track. */
export class RangePane {
  constructor(element, api, { trackName, onError }) {
    this.element = element;
    this.api = api;
    this.trackName = trackName;
    this.onError = onError;
    this.controller = null;
    this.timer = 0;
    this.answer = null;
    this.sort = { field: 'total_ps', descending: true };
  }

  /** Shows the totals of `mark` (`{startPs, endPs, tracks}`) once it rests. */
  show(mark) {
    this.cancel();
    this.mark = mark;
    this.answer = null;
    this.element.replaceChildren(this.heading(), h('div', { class: 'tv-details-empty' }, 'Adding up the range…'));
    this.timer = setTimeout(() => this.load(mark), SETTLE_MS);
  }

  async load(mark) {
    const controller = new AbortController();
    this.controller = controller;
    try {
      const answer = await this.api.aggregate({ ...mark, limit: ROWS }, controller.signal);
      if (this.controller !== controller) return;
      this.answer = answer;
      this.element.dataset.events = String(answer.events);
      this.render();
    } catch (error) {
      if (isAbort(error) || this.controller !== controller) return;
      this.element.replaceChildren(this.heading(), h('div', { class: 'tv-error' }, `Range: ${error.message}`));
      this.onError(error);
    }
  }

  /** The title line: the range's length, where it is, and on which tracks. */
  heading() {
    const { startPs, endPs, tracks } = this.mark;
    const where = tracks.length === 1 ? this.trackName(tracks[0]) : `${formatCount(tracks.length)} tracks`;
    return h(
      'h3',
      { class: 'tv-details-title' },
      `Range ${formatDuration(endPs - startPs)} on ${where}`,
      h('span', { class: 'tv-muted' }, `  ${formatTime(startPs, 1000)} – ${formatTime(endPs, 1000)}`),
    );
  }

  render() {
    const answer = this.answer;
    const rows = [...answer.rows];
    const { field, descending } = this.sort;
    rows.sort((a, b) => {
      const order = typeof a[field] === 'string' ? a[field].localeCompare(b[field]) : a[field] - b[field];
      return descending ? -order : order;
    });
    const shown = answer.names > rows.length ? ` (the ${formatCount(rows.length)} with the most time; the CSV has all)` : '';
    this.element.replaceChildren(
      this.heading(),
      h(
        'div',
        { class: 'tv-range-summary' },
        `${formatCount(answer.events)} events, ${formatCount(answer.names)} names${shown}. Times are the parts inside the range; self time leaves out the events nested inside. `,
        h('a', { class: 'tv-link', href: this.api.aggregateCsvUrl(this.mark), download: 'trace_range.csv' }, 'Export CSV'),
      ),
      rows.length === 0
        ? h('div', { class: 'tv-muted' }, 'No event in this range on these tracks.')
        : h(
            'table',
            { class: 'tv-range-table' },
            h(
              'thead',
              {},
              h(
                'tr',
                {},
                COLUMNS.map(([header, key, time]) =>
                  h(
                    'th',
                    { class: key === 'name' ? '' : 'tv-number', 'aria-sort': key === field ? (descending ? 'descending' : 'ascending') : null },
                    h('button', { class: 'tv-link', type: 'button', onclick: () => this.sortBy(key, time) }, header),
                  ),
                ),
              ),
            ),
            h(
              'tbody',
              {},
              rows.map((row) =>
                h(
                  'tr',
                  {},
                  COLUMNS.map(([, key, time]) =>
                    key === 'name'
                      ? h('td', { class: 'tv-range-name', title: row.name }, row.name)
                      : h('td', { class: 'tv-number', dataset: time ? { ps: String(row[key]) } : null }, time ? formatDuration(row[key]) : formatCount(row[key])),
                  ),
                ),
              ),
            ),
          ),
    );
  }

  /** Sorts by `field`: again on the same column reverses; numbers start largest first. */
  sortBy(field, numeric) {
    const descending = this.sort.field === field ? !this.sort.descending : numeric || field === 'count';
    this.sort = { field, descending };
    if (this.answer) this.render();
  }

  /** Stops a pending or running request. */
  cancel() {
    clearTimeout(this.timer);
    if (this.controller) this.controller.abort();
    this.controller = null;
  }
}

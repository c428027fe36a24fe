// Search over the whole trace (/api/trace/search): the box and the ◀ ▶ buttons in the
// toolbar, the result list beside the details pane. Enter runs a new query, starting at
// the first match at or after the window's start, or goes to the next match; Shift+Enter
// goes back. Results come a page at a time: stepping past either end of the page fetches
// the neighbouring page (by the server's after/before cursor), and past the last match
// wraps to the first, so next/previous reach every match. Jumping is the viewer's job
// (`onJump`).

import { isAbort } from './api.js';
import { h } from '../lib/dom.js';
import { formatDuration } from '../lib/format.js';
import { formatTime } from './time.js';

/** How many results one page holds (the total counts all matches). */
export const SEARCH_PAGE_SIZE = 500;

/** The largest picosecond time the server accepts: a cursor after every event. */
const END_OF_TIME_PS = '9223372036854775807';

/** The search box, its count and the result list of the current page. */
export class SearchPanel {
  /**
   * `api`: the TraceApi; `windowStartPs()`: where the visible window starts (a new
   * query starts there); `onJump(result)`: go to a result; `onError(error)`;
   * `trackName(id)`: a track's name; `onListChange(shown)`: the list was drawn or hidden.
   */
  constructor(api, { windowStartPs, onJump, onError, trackName, onListChange }) {
    this.api = api;
    this.windowStartPs = windowStartPs;
    this.onJump = onJump;
    this.onError = onError;
    this.trackName = trackName;
    this.onListChange = onListChange;
    /** Results per page; tests lower it to cross page boundaries in a few steps. */
    this.pageSize = SEARCH_PAGE_SIZE;
    this.query = '';
    this.results = [];
    this.total = 0;
    /** Rank among all matches (0-based) of `results[0]`. */
    this.offset = 0;
    /** Position of the current result in `results`, −1 for none. */
    this.index = -1;
    this.controller = null;
    this.input = h('input', {
      class: 'tv-search-input',
      type: 'search',
      placeholder: 'Search all events (Enter)',
      'aria-label': 'Search events by name',
      onkeydown: (event) => this.onKey(event),
    });
    this.count = h('span', { class: 'tv-search-count' });
    this.prevButton = h(
      'button',
      { class: 'tv-button', type: 'button', title: 'Previous result (Shift+Enter)', onclick: () => this.step(-1) },
      '◀',
    );
    this.nextButton = h(
      'button',
      { class: 'tv-button', type: 'button', title: 'Next result (Enter)', onclick: () => this.step(1) },
      '▶',
    );
    /** The toolbar part. */
    this.bar = h('div', { class: 'tv-search' }, this.input, this.prevButton, this.nextButton, this.count);
    /** The result list (hidden until a search has run). */
    this.list = h('div', { class: 'tv-results', hidden: true });
  }

  onKey(event) {
    if (event.key === 'Enter') {
      event.preventDefault();
      const text = this.input.value.trim();
      if (text !== this.query) this.run(text);
      else this.step(event.shiftKey ? -1 : 1);
    } else if (event.key === 'Escape') {
      this.input.blur();
    }
    event.stopPropagation();
  }

  /** Runs a search for `text` and jumps to its first match at or after the window's start. */
  async run(text) {
    this.query = text;
    this.results = [];
    this.total = 0;
    this.offset = 0;
    this.index = -1;
    if (text === '') {
      this.cancel();
      this.render();
      return;
    }
    this.count.textContent = 'searching…';
    // The server's after_ps without an id means "starting after that time".
    const fromPs = Math.floor(this.windowStartPs()) - 1;
    await this.fetchPage({ after_ps: fromPs }, (answer) => {
      // No match from the window on: wrap to the first one.
      if (answer.results.length === 0 && answer.total > 0) return { wrap: {} };
      return { select: 0 };
    });
  }

  /**
   * Moves to the next (+1) or previous (−1) match over all matches, fetching the
   * neighbouring page when the step leaves this one and wrapping around at the ends.
   */
  step(direction) {
    if (this.controller) return; // a page is on its way; this step would repeat it
    if (this.results.length === 0) {
      const text = this.input.value.trim();
      if (text !== '' && text !== this.query) this.run(text);
      return;
    }
    const index = this.index + direction;
    if (index >= 0 && index < this.results.length) {
      this.select(index);
    } else if (direction > 0) {
      const last = this.results[this.results.length - 1];
      const atEnd = this.offset + this.results.length >= this.total;
      this.fetchPage(atEnd ? {} : { after_ps: last.start_ps, after_id: last.id }, () => ({ select: 0 }));
    } else {
      const first = this.results[0];
      const cursor = this.offset === 0 ? { before_ps: END_OF_TIME_PS } : { before_ps: first.start_ps, before_id: first.id };
      this.fetchPage(cursor, (answer) => ({ select: answer.results.length - 1 }));
    }
  }

  /**
   * Fetches the page `cursor` names; `choose(answer)` says which result to select
   * (`{select: i}`) or that the first page should be fetched instead (`{wrap: {}}`).
   */
  async fetchPage(cursor, choose) {
    this.cancel();
    const controller = new AbortController();
    this.controller = controller;
    const query = this.query;
    try {
      let answer = normalized(await this.api.search(query, this.pageSize, cursor, controller.signal));
      if (this.controller === controller && choose(answer).wrap)
        answer = normalized(await this.api.search(query, this.pageSize, {}, controller.signal));
      if (this.controller !== controller) return;
      this.controller = null;
      this.results = answer.results;
      this.total = answer.total;
      this.offset = answer.offset;
      this.render();
      const { select } = choose(answer);
      if (select !== undefined && select >= 0 && select < this.results.length) this.select(select);
    } catch (error) {
      if (isAbort(error) || this.controller !== controller) return;
      this.controller = null;
      this.updateCount();
      this.onError(error);
    }
  }

  /** Makes result `index` of the page current and jumps to it. */
  select(index) {
    this.index = index;
    this.updateCurrent();
    const result = this.results[index];
    if (result) this.onJump(result);
  }

  render() {
    this.updateCount();
    if (this.query === '') {
      this.list.hidden = true;
      this.list.replaceChildren();
      this.onListChange(false);
      return;
    }
    this.list.hidden = false;
    const last = this.offset + this.results.length;
    const shown =
      this.results.length > 0 && this.results.length < this.total
        ? ` (${number(this.offset + 1)}–${number(last)} listed)`
        : '';
    this.list.replaceChildren(
      h(
        'div',
        { class: 'tv-results-head' },
        `${number(this.total)} ${this.total === 1 ? 'match' : 'matches'} for “${this.query}”${shown}`,
      ),
      h(
        'ol',
        { class: 'tv-results-list', start: String(this.offset + 1) },
        this.results.map((result, index) =>
          h(
            'li',
            { dataset: { index: String(index), event: String(result.id) }, onclick: () => this.select(index) },
            h('div', { class: 'tv-result-name', title: result.name }, result.name),
            h(
              'div',
              { class: 'tv-muted tv-result-where' },
              `${formatTime(result.start_ps, 1000)} · ${formatDuration(result.dur_ps)} · ${this.trackName(result.track)}`,
            ),
          ),
        ),
      ),
    );
    this.onListChange(true);
  }

  /** "k of N": the current match's rank among all matches. */
  updateCount() {
    if (this.query === '') this.count.textContent = '';
    else if (this.total === 0) this.count.textContent = 'no match';
    else if (this.index < 0) this.count.textContent = `${number(this.total)} matches`;
    else this.count.textContent = `${number(this.offset + this.index + 1)} of ${number(this.total)}`;
  }

  updateCurrent() {
    this.updateCount();
    for (const item of this.list.querySelectorAll('li')) {
      const current = Number(item.dataset.index) === this.index;
      item.classList.toggle('tv-current', current);
      if (current) item.scrollIntoView({ block: 'nearest' });
    }
  }

  /** Cancels a search in flight. */
  cancel() {
    if (this.controller) this.controller.abort();
    this.controller = null;
  }
}

/** The answer with its fields checked: `{total, offset, results}`. */
function normalized(answer) {
  return {
    total: Number(answer.total) || 0,
    offset: Number(answer.offset) || 0,
    results: Array.isArray(answer.results) ? answer.results : [],
  };
}

function number(value) {
  return value.toLocaleString('en-US');
}

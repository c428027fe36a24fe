// Search over the whole trace (/api/trace/search): the box and the ◀ ▶ buttons in the
// toolbar, the result list beside the details pane. Enter runs a new query or goes to
// the next result; Shift+Enter goes back. Jumping is the viewer's job (`onJump`).

import { isAbort } from './api.js';
import { h } from '../lib/dom.js';
import { formatDuration, formatTime } from './time.js';

/** How many results one search lists (the total counts all matches). */
export const SEARCH_LIMIT = 500;

/** The search box, its count and the result list. */
export class SearchPanel {
  constructor(api, { onJump, onError }) {
    this.api = api;
    this.onJump = onJump;
    this.onError = onError;
    this.query = '';
    this.results = [];
    this.total = 0;
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

  /** Runs a search for `text` and jumps to its first result. */
  async run(text) {
    this.query = text;
    this.results = [];
    this.total = 0;
    this.index = -1;
    if (this.controller) this.controller.abort();
    if (text === '') {
      this.render();
      return;
    }
    const controller = new AbortController();
    this.controller = controller;
    this.count.textContent = 'searching…';
    try {
      const answer = await this.api.search(text, SEARCH_LIMIT, controller.signal);
      if (this.controller !== controller) return;
      this.results = Array.isArray(answer.results) ? answer.results : [];
      this.total = Number(answer.total) || 0;
      this.render();
      if (this.results.length > 0) this.select(0);
    } catch (error) {
      if (isAbort(error) || this.controller !== controller) return;
      this.count.textContent = '';
      this.onError(error);
    }
  }

  /** Moves to the next (+1) or previous (−1) result, wrapping around. */
  step(direction) {
    if (this.results.length === 0) {
      const text = this.input.value.trim();
      if (text !== '' && text !== this.query) this.run(text);
      return;
    }
    this.select((this.index + direction + this.results.length) % this.results.length);
  }

  /** Makes result `index` current and jumps to it. */
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
      return;
    }
    this.list.hidden = false;
    const shown = this.results.length < this.total ? ` (first ${this.results.length} listed)` : '';
    this.list.replaceChildren(
      h(
        'div',
        { class: 'tv-results-head' },
        `${this.total.toLocaleString('en-US')} ${this.total === 1 ? 'match' : 'matches'} for “${this.query}”${shown}`,
      ),
      h(
        'ol',
        { class: 'tv-results-list' },
        this.results.map((result, index) =>
          h(
            'li',
            { dataset: { index: String(index), event: String(result.id) }, onclick: () => this.select(index) },
            h('span', { class: 'tv-result-name', title: result.name }, result.name),
            h(
              'span',
              { class: 'tv-muted' },
              ` ${formatTime(result.start_ps, 1000)} · ${formatDuration(result.dur_ps)}`,
            ),
          ),
        ),
      ),
    );
  }

  updateCount() {
    if (this.query === '') this.count.textContent = '';
    else if (this.results.length === 0) this.count.textContent = 'no match';
    else this.count.textContent = `${this.index + 1} / ${this.total.toLocaleString('en-US')}`;
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

// The pane under the trace viewer's timeline: the selected event's details and a marked
// range's totals (one at a time, as tabs) beside the search results. It opens only when
// one of them has something to show, closes with its × (until something new is chosen),
// and is resized by dragging its top edge; the timeline keeps the rest of the window.

import { h } from '../lib/dom.js';

/**
 * The pane; `details`, `range` and `results` are the elements it holds; `onShown(what)`
 * hears after every change what it shows ('closed', 'details' or 'range').
 */
export class BottomPane {
  constructor({ details, range, results, onShown }) {
    this.onShown = onShown;
    this.details = details;
    this.range = range;
    this.results = results;
    this.tab = 'details';
    this.closed = false;
    this.tabs = h('div', { class: 'tv-pane-tabs', role: 'tablist' });
    this.splitter = h('div', { class: 'tv-splitter', title: 'Drag to resize the pane', role: 'separator' });
    this.element = h(
      'div',
      { class: 'tv-bottom', hidden: true },
      this.splitter,
      h(
        'div',
        { class: 'tv-pane-head' },
        this.tabs,
        h(
          'button',
          {
            class: 'tv-button tv-pane-close',
            type: 'button',
            title: 'Close this pane (the selection and the mark stay)',
            'aria-label': 'Close the pane',
            onclick: () => this.close(),
          },
          '×',
        ),
      ),
      h('div', { class: 'tv-pane-body' }, details, range, results),
    );
    this.state = { hasDetails: false, hasRange: false, detailsLabel: 'Event' };
  }

  /** Shows `tab` ('details' or 'range') and opens the pane again if it was closed. */
  open(tab) {
    this.tab = tab;
    this.closed = false;
    this.refresh();
  }

  /** Closes the pane until something new is selected, marked or searched. */
  close() {
    this.closed = true;
    this.refresh();
  }

  /**
   * Shows what there is: `hasDetails` (an event or merged run, its tab called
   * `detailsLabel`), `hasRange` (a marked range); the search results show when their
   * list is not hidden.
   */
  refresh(state = this.state) {
    this.state = state;
    const { hasDetails, hasRange, detailsLabel } = state;
    const hasSearch = !this.results.hidden;
    if (this.tab === 'range' && !hasRange) this.tab = 'details';
    if (this.tab === 'details' && !hasDetails && hasRange) this.tab = 'range';
    const open = !this.closed && (hasDetails || hasRange || hasSearch);
    this.element.hidden = !open;
    this.details.hidden = !(this.tab === 'details' && hasDetails);
    this.range.hidden = !(this.tab === 'range' && hasRange);
    const searchOnly = this.details.hidden && this.range.hidden;
    this.element.classList.toggle('tv-search-only', searchOnly);
    const tab = (name, label) =>
      h(
        'button',
        {
          class: 'tv-pane-tab',
          type: 'button',
          role: 'tab',
          'aria-selected': String(this.tab === name),
          onclick: () => {
            this.tab = name;
            this.refresh();
          },
        },
        label,
      );
    const tabs = [
      hasDetails ? tab('details', detailsLabel) : null,
      hasRange ? tab('range', 'Range') : null,
      hasSearch && !searchOnly ? h('span', { class: 'tv-muted tv-pane-note' }, 'search results at the right') : null,
    ];
    this.tabs.replaceChildren(...tabs.filter((node) => node !== null));
    this.onShown(open ? this.tab : 'closed');
  }

  /**
   * Lets the pane's top edge resize it by dragging, between 80 px and 75 % of `root`;
   * returns a function that unwires it.
   */
  attachSplitter(root) {
    const { splitter, element: pane } = this;
    let from = null;
    const down = (event) => {
      if (event.button !== 0) return;
      from = { y: event.clientY, height: pane.getBoundingClientRect().height };
      splitter.setPointerCapture(event.pointerId);
      event.preventDefault();
    };
    const move = (event) => {
      if (!from) return;
      const most = root.getBoundingClientRect().height * 0.75;
      const height = Math.min(most, Math.max(80, from.height + from.y - event.clientY));
      pane.style.flexBasis = `${Math.round(height)}px`;
    };
    const up = (event) => {
      from = null;
      if (splitter.hasPointerCapture(event.pointerId)) splitter.releasePointerCapture(event.pointerId);
    };
    const listeners = [['pointerdown', down], ['pointermove', move], ['pointerup', up], ['pointercancel', up]];
    for (const [name, listener] of listeners) splitter.addEventListener(name, listener);
    return () => {
      for (const [name, listener] of listeners) splitter.removeEventListener(name, listener);
    };
  }
}

// The details pane under the timeline: the selected event's name, track, start,
// duration, every arg the server has for it and its flows (each a link to the other
// end), or a merged run's count and span.

import { h } from '../lib/dom.js';
import { formatDuration } from '../lib/format.js';
import { formatTime } from './time.js';

/**
 * Renders into `element`; `onJump(eventId)` follows a flow, `onZoom(startPs, endPs)`
 * zooms into a run, `onPin(trackId)` pins or unpins a track, `isPinned(trackId)` says
 * whether it is pinned.
 */
export class DetailsPane {
  constructor(element, { onJump, onZoom, onPin, isPinned }) {
    this.element = element;
    this.onJump = onJump;
    this.onZoom = onZoom;
    this.onPin = onPin;
    this.isPinned = isPinned;
    this.pinButton = null;
    this.showEmpty();
  }

  /** Updates the pin button after the event's track was pinned or unpinned. */
  setPinned(pinned) {
    if (this.pinButton) this.pinButton.textContent = pinned ? 'Unpin track (P)' : 'Pin track (P)';
  }

  /** The hint shown when nothing is selected. */
  showEmpty() {
    this.element.replaceChildren(
      h('div', { class: 'tv-details-empty' }, 'Click an event to see its details; press ? for the shortcuts.'),
    );
  }

  /** A line saying the event is being fetched. */
  showLoading() {
    this.element.replaceChildren(h('div', { class: 'tv-details-empty' }, 'Loading event…'));
  }

  /** A line saying what went wrong. */
  showError(message) {
    this.element.replaceChildren(h('div', { class: 'tv-error' }, message));
  }

  /** The answer of /api/trace/event. */
  showEvent(event) {
    const args = event.args && typeof event.args === 'object' ? Object.entries(event.args) : [];
    const flows = Array.isArray(event.flows) ? event.flows : [];
    this.pinButton = h('button', { class: 'tv-button tv-pin', type: 'button', onclick: () => this.onPin(event.track) });
    this.setPinned(this.isPinned(event.track));
    this.element.replaceChildren(
      h('h3', { class: 'tv-details-title', title: event.name }, event.name),
      h('div', { class: 'tv-details-actions' }, this.pinButton),
      h(
        'table',
        { class: 'tv-fields' },
        field('Track', event.track_name ?? String(event.track)),
        field('Start', formatTime(event.start_ps, 1000), `${event.start_ps} ps`),
        field('Duration', formatDuration(event.dur_ps), `${event.dur_ps} ps`),
        field('End', formatTime(event.start_ps + event.dur_ps, 1000)),
        field('Depth', String(event.depth)),
        field('Event id', String(event.id)),
      ),
      h('h4', {}, `Args (${args.length})`),
      args.length === 0
        ? h('div', { class: 'tv-muted' }, 'none')
        : h(
            'table',
            { class: 'tv-args' },
            args.map(([key, value]) => h('tr', {}, h('th', {}, key), h('td', {}, String(value)))),
          ),
      h('h4', {}, `Flows (${flows.length})`),
      flows.length === 0
        ? h('div', { class: 'tv-muted' }, 'none')
        : h(
            'ul',
            { class: 'tv-flows' },
            flows.map((flow) =>
              h(
                'li',
                {},
                h(
                  'button',
                  {
                    class: 'tv-link',
                    type: 'button',
                    dataset: { event: String(flow.event) },
                    title: 'Jump to the other end of this flow',
                    onclick: () => this.onJump(flow.event),
                  },
                  `${flow.direction === 'in' ? '← from' : '→ to'} ${flow.name}`,
                ),
                h('span', { class: 'tv-muted' }, ` at ${formatTime(flow.start_ps, 1000)}`),
              ),
            ),
          ),
    );
  }

  /** A merged run from the view (no single event to fetch). */
  showMerged(run, trackName) {
    this.element.replaceChildren(
      h('h3', { class: 'tv-details-title' }, `${run.count.toLocaleString('en-US')} events (merged)`),
      h(
        'table',
        { class: 'tv-fields' },
        field('Track', trackName),
        field('Span', `${formatTime(run.startPs, 1000)} – ${formatTime(run.endPs, 1000)}`),
        field('Length', formatDuration(run.endPs - run.startPs)),
        field('Longest', run.name),
      ),
      h(
        'button',
        {
          class: 'tv-button',
          type: 'button',
          onclick: () => this.onZoom(run.startPs, run.endPs),
        },
        'Zoom in to these events',
      ),
    );
  }
}

/** A row of the fields table; `exact` (the value in picoseconds) shows on hover. */
function field(label, value, exact = null) {
  return h('tr', {}, h('th', {}, label), h('td', { title: exact, dataset: exact ? { exact } : null }, value));
}

// The keyboard and mouse reference the `?` key opens: one list, read by the overlay.

import { h } from '../lib/dom.js';

/** Every control of the trace viewer, as [keys, what it does]. */
export const CONTROLS = [
  ['W / S', 'zoom in / out around the mouse pointer (else the middle); hold to zoom smoothly'],
  ['A / D', 'pan left / right; hold to pan smoothly'],
  ['Wheel, Ctrl+Wheel', 'zoom around the mouse pointer'],
  ['Shift+Wheel, horizontal wheel', 'pan left / right'],
  ['Drag', 'pan (left/right and up/down)'],
  ['Drag a track’s name', 'move the track up or down within its section (or among the pinned tracks); the order stays in the address'],
  ['Wheel over the track names, scrollbar', 'scroll tracks up / down'],
  ['Click', 'select an event (details below); click a section header to fold it'],
  ['Shift+Drag', 'mark a time range on the tracks it crosses (start on the ruler for every track): the pane below adds up each event name’s count, total and self time in it'],
  ['M', 'mark the selected event’s time range on its track: what runs inside it (again: unmark)'],
  ['F', 'fit the selected event (or the marked range) to the window'],
  ['P', 'pin the selected event’s track at the top (again: unpin); the filter box shows only the tracks whose name holds its text'],
  ['0', 'reset zoom to the whole trace'],
  ['/', 'focus the search box; Enter: search from the window start, then next result; Shift+Enter: previous'],
  ['Esc', 'clear the mark, then the selection; close this help'],
  ['?', 'show / hide this help'],
];

/** The help overlay (hidden until toggled); `onClose` runs when its button is pressed. */
export function helpOverlay(onClose) {
  return h(
    'div',
    { class: 'tv-help', hidden: true, role: 'dialog', 'aria-label': 'Trace viewer shortcuts' },
    h(
      'div',
      { class: 'tv-help-box' },
      h('h3', {}, 'Trace viewer controls'),
      h(
        'table',
        {},
        CONTROLS.map(([keys, action]) => h('tr', {}, h('th', {}, keys), h('td', {}, action))),
      ),
      h('button', { class: 'tv-button', type: 'button', onclick: onClose }, 'Close'),
    ),
  );
}

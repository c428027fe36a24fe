// A row of toggle buttons of which exactly one is pressed.

import { h } from '../lib/dom.js';

/**
 * Buttons for `options` (`[{value, label}]`), `value` pressed; `onSelect(value)`
 * runs when another is chosen. `label` names the group.
 */
export function segmented({ label, options, value, onSelect, id = null }) {
  const buttons = options.map((option) => h('button', {
    type: 'button', 'aria-pressed': String(option.value === value), dataset: { value: option.value },
    onClick: () => {
      if (button(option.value).getAttribute('aria-pressed') === 'true') return;
      for (const b of buttons) b.setAttribute('aria-pressed', String(b.dataset.value === option.value));
      onSelect(option.value);
    },
  }, option.label));
  const button = (v) => buttons.find((b) => b.dataset.value === v);
  return h('div', { class: 'segmented', role: 'group', 'aria-label': label, id }, buttons);
}

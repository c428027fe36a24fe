// The option controls a tool page offers above its report, drawn from the tool's
// spec (`/api/tools`): a segmented control for a choice, a text field with Apply for
// anything typed. Values are checked by the server (`/api/options`, which reads them
// exactly as `/api/tool` does) before the tool is asked for, so a typo is said in the
// page and never becomes a tool request. Options live in the query string, so a view
// with options is a link, and back/forward step through option changes.

import { h } from '../lib/dom.js';
import { getJson } from '../lib/api.js';
import { segmented } from './segmented.js';

/** The options of `tool` (its spec) that change runs of `format`. */
function optionsFor(spec, format) {
  if (!spec) return [];
  return spec.options.filter((option) => option.sources.length === 0 || option.sources.includes(format));
}

/** The options `/api/tool` and `/api/csv` get for `tool` from the query string `params`. */
export function toolOptions(spec, format, params) {
  const options = {};
  for (const option of optionsFor(spec, format)) {
    const value = params.get(option.key);
    if (value) options[option.key] = value;
  }
  return options;
}

/**
 * What is wrong with `options` for `tool`, as the server says it (`null` when they
 * are good): asked before the tool so that a bad value is never a tool request.
 */
export async function optionsProblem(tool, options) {
  if (Object.keys(options).length === 0) return null;
  const answer = await getJson('/api/options', { tool, ...options });
  return answer.problem || null;
}

/** The units a duration is shown in, largest first (ps per unit). */
const SHOWN_UNITS = [['s', 1e12], ['ms', 1e9], ['µs', 1e6], ['ns', 1e3], ['ps', 1]];

/** `ps` in the largest unit that keeps it ≥ 1, unrounded (`1.5 ms`, `100 µs`). */
function durationText(ps) {
  const [unit, scale] = SHOWN_UNITS.find(([, size]) => Math.abs(ps) >= size) || SHOWN_UNITS[SHOWN_UNITS.length - 1];
  return `${Number((ps / scale).toPrecision(12))} ${unit}`;
}

/** The value of field `name` in `result`, at its top level or one object down. */
function field(result, name) {
  if (!result || !name) return undefined;
  if (Object.hasOwn(result, name)) return result[name];
  for (const value of Object.values(result)) {
    if (value && typeof value === 'object' && !Array.isArray(value) && Object.hasOwn(value, name)) return value[name];
  }
  return undefined;
}

/** What the answer says was in effect for `option`, as the page shows it (`''` when it does not say). */
function inEffect(option, answer) {
  const value = field(answer && answer.result, option.in_effect);
  if (option.kind.type === 'duration') return Number.isFinite(value) ? `In effect: ${durationText(value)}.` : '';
  if (typeof value !== 'string') return '';
  const after = option.in_effect_after ? value.lastIndexOf(option.in_effect_after) : -1;
  if (option.in_effect_after && after < 0) return '';
  const named = after >= 0 ? value.slice(after + option.in_effect_after.length) : value;
  return `Shown: ${named.replace(/\.$/, '')}.`;
}

/** The id of an option's elements (`gap-threshold`). */
function idOf(option) {
  return option.key.replaceAll('_', '-');
}

/**
 * The option controls of `tool` (`null` when it has none on runs of `format`), as
 * `{element, showAnswer(answer)}`. `apply(changes)` goes to the view with the
 * changed options (`null` removes one); `busy(true|false)` marks the page busy while
 * a typed value is checked. `problem` is the server's sentence about the options the
 * query string asks for, shown under the field it is about.
 */
export function optionsBar({ spec, format, params, apply, busy, problem }) {
  const options = optionsFor(spec, format);
  if (options.length === 0) return null;
  const controls = options.map((option) => (option.kind.type === 'choice'
    ? choiceControl(option, params, apply)
    : textControl(option, spec.name, params, { apply, busy, problem })));
  const element = controls.length === 1
    ? controls[0].element
    : h('div', { class: 'tool-options', id: 'tool-options' }, ...controls.map((c) => c.element));
  return {
    element,
    showAnswer(answer) {
      for (const control of controls) control.showAnswer(answer);
    },
  };
}

function choiceControl(option, params, apply) {
  const id = idOf(option);
  const value = params.get(option.key) || option.default;
  const shown = h('span', { class: 'option-hint', id: `${id}-shown` });
  const element = h('div', { class: 'tool-options', id: 'tool-options' },
    h('span', { class: 'option-label', id: `${id}-label` }, option.label),
    segmented({
      label: option.label,
      id,
      value,
      options: option.kind.choices,
      onSelect: (next) => apply({ [option.key]: next === option.default ? null : next }),
    }),
    h('span', { class: 'option-hint' }, option.help),
    shown);
  return { element, showAnswer: (answer) => { shown.textContent = inEffect(option, answer); } };
}

function textControl(option, tool, params, { apply, busy, problem }) {
  const id = idOf(option);
  const asked = params.get(option.key) || '';
  const input = h('input', {
    type: 'text', id, value: asked, placeholder: option.default ? `${option.default} (default)` : '', size: 12,
    spellcheck: 'false', autocomplete: 'off', 'aria-describedby': `${id}-help ${id}-message`,
  });
  const applied = h('span', { class: 'option-hint', id: `${id}-applied` });
  const message = h('p', { class: 'option-error', id: `${id}-message`, role: 'alert', hidden: true });
  const showError = (text) => {
    message.textContent = text;
    message.hidden = !text;
    if (text) input.setAttribute('aria-invalid', 'true');
    else input.removeAttribute('aria-invalid');
  };
  const form = h('form', {
    class: 'tool-options', id: 'tool-options', novalidate: true,
    onSubmit: async (event) => {
      event.preventDefault();
      const value = input.value.trim();
      if (value === asked) { showError(''); return; }
      if (value === '') { apply({ [option.key]: null }); return; }
      busy(true);
      const error = await optionsProblem(tool, { [option.key]: value }).catch((e) => e.message);
      if (error) {
        showError(error);
        busy(false);
      } else {
        apply({ [option.key]: value });
      }
    },
    onInput: () => showError(''),
  },
  h('label', { class: 'option-label', for: id }, option.label),
  input,
  h('button', { type: 'submit', id: `${id}-apply` }, 'Apply'),
  h('span', { class: 'option-hint', id: `${id}-help` }, option.help),
  applied,
  message);
  if (asked && problem) showError(problem);
  return { element: form, showAnswer: (answer) => { applied.textContent = inEffect(option, answer); } };
}

// The analysis options a few tool pages offer above their report, as `/api/tool`
// takes them (crates/web/API.md): the step-time breakdown of XProf's step tools on
// XSpace runs (`breakdown=classic|xprof`) and the GPU gap threshold of the transfers
// diagnosis (`gap_threshold=50us`). Both live in the query string, so a view with
// options is a link, and back/forward step through option changes.

import { h } from '../lib/dom.js';
import { segmented } from './segmented.js';

/** The tools whose step-time breakdown can be chosen (XProf's step database). */
const BREAKDOWN_TOOLS = ['overview_page', 'input_pipeline_analyzer', 'pod_viewer'];

/** The breakdown the API computes without `breakdown=`. */
const DEFAULT_BREAKDOWN = 'classic';

/** The gap threshold the API applies without `gap_threshold=` (API.md). */
const DEFAULT_GAP_THRESHOLD = '100us';

/** Picoseconds per duration unit, as the server reads `gap_threshold` (mlprof_model::duration). */
const PS_PER_UNIT = { ps: 1, ns: 1e3, us: 1e6, 'µs': 1e6, ms: 1e9, s: 1e12, m: 60e12, min: 60e12 };

/** The largest duration the server takes (half of i64's range, in ps). */
const MAX_DURATION_PS = 2 ** 62;

/**
 * Reads a duration as the server does (`50us`, `1.5 ms`, `250ns`; a bare number is
 * in µs): `{ps}`, or `{error}` saying what is wrong. Checked here so that a typo
 * never reaches the server as a request it must refuse.
 */
export function parseDuration(text) {
  const trimmed = text.trim();
  const [, number, rest] = /^([\d.]*)(.*)$/s.exec(trimmed);
  const example = 'a number and a unit, such as 50us, 1ms or 2s';
  if (!/^(\d+\.?\d*|\.\d+)$/.test(number)) return { error: `${JSON.stringify(text)} is not a duration: expected ${example}.` };
  const unit = rest.trim() || 'us';
  if (!Object.hasOwn(PS_PER_UNIT, unit)) return { error: `Unknown unit ${JSON.stringify(unit)} in ${JSON.stringify(text)}: use ps, ns, us, ms, s or m.` };
  const ps = Number(number) * PS_PER_UNIT[unit];
  if (!Number.isFinite(ps) || ps > MAX_DURATION_PS) return { error: `${JSON.stringify(text)} is too long a duration.` };
  return { ps: Math.round(ps) };
}

/** The units a threshold is shown in, largest first (ps per unit). */
const SHOWN_UNITS = [['s', 1e12], ['ms', 1e9], ['µs', 1e6], ['ns', 1e3], ['ps', 1]];

/** `ps` in the largest unit that keeps it ≥ 1, unrounded (`1.5 ms`, `100 µs`). */
function thresholdText(ps) {
  const [unit, scale] = SHOWN_UNITS.find(([, size]) => Math.abs(ps) >= size) || SHOWN_UNITS[SHOWN_UNITS.length - 1];
  return `${Number((ps / scale).toPrecision(12))} ${unit}`;
}

/** The query keys holding analysis options; they stay when the run, host or tool changes. */
export const OPTION_KEYS = ['breakdown', 'gap_threshold'];

/**
 * Which option `tool` takes on a run of `format`: `breakdown`, `gap_threshold`, or
 * `null`. Kineto runs have one breakdown only (steps are `ProfilerStep#N` spans with
 * host and device events), so they get no breakdown control.
 */
export function optionOf(tool, format) {
  if (BREAKDOWN_TOOLS.includes(tool) && format === 'xspace') return 'breakdown';
  if (tool === 'transfers') return 'gap_threshold';
  return null;
}

/** The options `/api/tool` and `/api/csv` get for `tool` from the query string `params`. */
export function toolOptions(tool, format, params) {
  const key = optionOf(tool, format);
  const value = key ? params.get(key) : null;
  return value ? { [key]: value } : {};
}

/**
 * The option controls of `tool` (`null` when it has none), as
 * `{element, showAnswer(answer), problem}`: `problem` is what is wrong with the
 * option the query string asks for (then the tool is not asked for), or `null`.
 * `apply(changes)` goes to the view with the changed options (`null` removes one).
 */
export function optionsBar({ tool, format, params, apply }) {
  const key = optionOf(tool, format);
  if (key === 'breakdown') return breakdownBar(params, apply);
  if (key === 'gap_threshold') return gapThresholdBar(params, apply);
  return null;
}

function breakdownBar(params, apply) {
  const asked = params.get('breakdown');
  const value = asked || DEFAULT_BREAKDOWN;
  const shown = h('span', { class: 'option-hint', id: 'breakdown-shown' });
  const element = h('div', { class: 'tool-options', id: 'tool-options' },
    h('span', { class: 'option-label', id: 'breakdown-label' }, 'Step-time breakdown'),
    segmented({
      label: 'Step-time breakdown',
      id: 'breakdown',
      value,
      options: [{ value: 'classic', label: 'Classic' }, { value: 'xprof', label: 'XProf' }],
      onSelect: (next) => apply({ breakdown: next === DEFAULT_BREAKDOWN ? null : next }),
    }),
    h('span', { class: 'option-hint' },
      'Classic adds host events (input, kernel launch, host compute) to GPU steps; XProf counts device events only. CPU-only profiles are the same in both.'),
    shown);
  return {
    element,
    showAnswer(answer) {
      const result = answer.result || {};
      const source = result.step_source || (result.steps && result.steps.step_source) || '';
      const match = /Breakdown: (.*?)\.?$/.exec(source);
      shown.textContent = match ? `Shown: ${match[1]}.` : '';
    },
    problem: asked && asked !== 'classic' && asked !== 'xprof'
      ? `The address asks for step-time breakdown ${JSON.stringify(asked)}; choose Classic or XProf.`
      : null,
  };
}

function gapThresholdBar(params, apply) {
  const asked = params.get('gap_threshold') || '';
  const input = h('input', {
    type: 'text', id: 'gap-threshold', value: asked, placeholder: `${DEFAULT_GAP_THRESHOLD} (default)`, size: 12,
    spellcheck: 'false', autocomplete: 'off', 'aria-describedby': 'gap-threshold-help gap-threshold-message',
  });
  const applied = h('span', { class: 'option-hint', id: 'gap-threshold-applied' });
  const message = h('p', { class: 'option-error', id: 'gap-threshold-message', role: 'alert', hidden: true });
  const showError = (text) => {
    message.textContent = text;
    message.hidden = !text;
    if (text) input.setAttribute('aria-invalid', 'true');
    else input.removeAttribute('aria-invalid');
  };
  const form = h('form', {
    class: 'tool-options', id: 'tool-options', novalidate: true,
    onSubmit: (event) => {
      event.preventDefault();
      const value = input.value.trim();
      if (value === asked) { showError(''); return; }
      if (value === '') { apply({ gap_threshold: null }); return; }
      const { error } = parseDuration(value);
      if (error) showError(error);
      else apply({ gap_threshold: value });
    },
    onInput: () => showError(''),
  },
  h('label', { class: 'option-label', for: 'gap-threshold' }, 'GPU gap threshold'),
  input,
  h('button', { type: 'submit', id: 'gap-threshold-apply' }, 'Apply'),
  h('span', { class: 'option-hint', id: 'gap-threshold-help' },
    `Device idle time longer than this is reported as a gap: a number and a unit (ns, us, ms, s); default ${DEFAULT_GAP_THRESHOLD}.`),
  applied,
  message);
  const problem = asked ? parseDuration(asked).error || null : null;
  if (problem) showError(problem);
  return {
    element: form,
    showAnswer(answer) {
      const ps = answer.result && answer.result.gap_threshold_ps;
      applied.textContent = Number.isFinite(ps) ? `In effect: ${thresholdText(ps)}.` : '';
    },
    problem,
  };
}

// The pod viewer: a step slider and, for the chosen step, one stacked column per
// worker (host) split by XProf's step-time categories, with hover details; then
// the report's tables (every step × host, stragglers).

import { append, clear, h } from '../lib/dom.js';
import { formatMs, formatUs } from '../lib/format.js';
import { card, remainingSections } from '../components/report_view.js';
import { notesBlock } from '../components/rich_text.js';
import { stackedColumns } from '../charts/columns.js';
import { STEP_CATEGORIES } from './step_chart.js';


/** Renders the pod viewer in `answer`. */
export function render(root, answer, ctx) {
  const { report, result } = answer;
  const steps = result.steps || [];
  const chart = h('div', { id: 'pod-chart' });
  const about = h('div', { id: 'pod-step-notes' });
  if (steps.length === 0) {
    append(root, [card('Pod viewer', [notesBlock(result.warnings), h('p', { class: 'chart-empty' }, 'No steps were found in this profile.')]), ...remainingSections(report, ctx)]);
    return;
  }
  const asked = steps.findIndex((step) => String(step.step_num) === ctx.params.get('step'));
  let index = asked < 0 ? 0 : asked;
  const label = h('output', { id: 'pod-step-label', for: 'pod-step' });
  const slider = h('input', {
    type: 'range', id: 'pod-step', min: 0, max: steps.length - 1, step: 1, value: index, 'aria-label': 'Step',
    onInput: () => { index = Number(slider.value); ctx.setParams({ step: steps[index].step_num }); show(); },
  });

  function show() {
    const step = steps[index];
    label.textContent = `Step ${step.step_num} (${index + 1} of ${steps.length})`;
    slider.setAttribute('aria-valuetext', label.textContent);
    const records = step.hosts;
    clear(chart).append(stackedColumns({
      title: `Step ${step.step_num}: step time per worker by category`,
      columns: records.map((record) => record.host),
      series: STEP_CATEGORIES.map((category, i) => ({ label: category.label, color: category.color, values: records.map((record) => record.breakdown_us[i] / 1000) })),
      yLabel: 'Time (ms)',
      format: formatMs,
      details: (i) => [['Step time', formatUs(records[i].total_duration_us)], ['Bottleneck', records[i].bottleneck], ['Core id', String(records[i].core_id)]],
    }));
    const straggler = step.straggler;
    clear(about).append(notesBlock(straggler ? [
      `Straggler: ${straggler.host}, ${formatUs(straggler.behind_fastest_us)} behind the fastest worker and ${formatUs(straggler.behind_median_us)} behind the median; most of the excess is ${straggler.excess_category} (${formatUs(straggler.excess_us)}).`,
    ] : [`${records.length === 1 ? 'One worker' : `${records.length} workers`} in this step.`]));
  }

  append(root, [
    card('Step-time breakdown per worker', [
      notesBlock(result.warnings),
      h('div', { class: 'controls' }, h('label', { for: 'pod-step' }, 'Step'), slider, label),
      chart,
      about,
    ], { id: 'pod-viewer' }),
    ...remainingSections(report, ctx),
  ]);
  show();
}

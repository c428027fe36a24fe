// The overview page: performance summary, step-time graph, precision, top ops,
// run environment and the recommendation, as in the TF Profiler's overview.

import { append, h } from '../lib/dom.js';
import { formatMs, formatPercent } from '../lib/format.js';
import { card, remainingSections, sectionCard, sectionPicker } from '../components/report_view.js';
import { notesBlock } from '../components/rich_text.js';
import { keyFigures, properties } from '../components/stats.js';
import { pieChart } from '../charts/pie.js';
import { inputTone, stepTimeChart } from './step_chart.js';


/** Renders the overview of `answer.result` with the report's tables. */
export function render(root, answer, ctx) {
  const { report, result } = answer;
  const steps = result.steps;
  const { take, used } = sectionPicker(report);
  const summarySection = take('Performance summary');
  const stepSection = take('Step time by category');
  const topSection = take('Top 10');
  const environmentSection = take('Run environment');
  const recommendationSection = take('Recommendation');

  append(root, [
    h('div', { class: 'cards-row' },
      card('Performance summary', [summaryFigures(steps, result, ctx.format), notesBlock(summarySection ? summarySection.notes : [])], { id: 'performance-summary' }),
      h('div', {},
        card('Run environment', [environment(result.run_environment), notesBlock(environmentSection ? environmentSection.notes : [])], { id: 'run-environment' }),
        card('Recommendation for next step', notesBlock(recommendations(recommendationSection, steps), 'notes recommendations'), { id: 'recommendation' }),
        card('Device compute precision', precision(result), { id: 'precision' }))),
    stepSection ? sectionCard(stepSection, ctx, { before: stepTimeChart(steps.steps) }) : card('Step-time graph', stepTimeChart(steps.steps)),
    topSection ? sectionCard(topSection, ctx) : null,
    ...remainingSections(report, ctx, used),
  ]);
}

function summaryFigures(steps, result, format) {
  const time = steps.step_time_ms;
  const average = (label) => {
    const entry = steps.category_ms.find(([key]) => key === label);
    return entry ? entry[1].average : 0;
  };
  const figures = [
    { label: 'Average step time', text: formatMs(time.average), value: time.average, tone: 'highlight', title: `over ${steps.steps.length} steps` },
    { label: 'Standard deviation', text: formatMs(time.standard_deviation), value: time.standard_deviation },
    { label: 'Input', text: formatPercent(steps.bottleneck.input_percent), value: steps.bottleneck.input_percent, tone: inputTone(steps.bottleneck.input_percent) },
    { label: 'Steps', text: String(steps.steps.length), value: steps.steps.length },
  ];
  const categories = [
    ['Compilation', 'compileTimeMs'], ['Input', 'infeedTimeMs'], ['Output', 'outfeedTimeMs'], ['Kernel launch', 'kernelLaunchTimeMs'],
    ['Host compute', 'hostComputeTimeMs'], ['Device to device', 'deviceToDeviceTimeMs'], ['Device collectives', 'deviceCollectivesTimeMs'],
    ['Device compute', 'deviceComputeTimeMs'], ['All others', 'otherTimeMs'],
  ];
  // PyTorch runs every op eagerly and has no TF ops: the placement in its own words.
  const placement = format === 'kineto'
    ? [
      ['Op placement: host', formatPercent(result.host_tf_op_percent)],
      ['Op placement: device', formatPercent(result.device_tf_op_percent)],
    ]
    : [
      ['TF op placement: host', formatPercent(result.host_tf_op_percent)],
      ['TF op placement: device', formatPercent(result.device_tf_op_percent)],
      ['Host op time on eager execution', formatPercent(result.host_op_time_eager_percent)],
      ['Device op time on eager execution', formatPercent(result.device_op_time_eager_percent)],
    ];
  return [
    keyFigures(figures, { id: 'summary-figures' }),
    h('h3', {}, 'Average time per step by category'),
    properties(categories.map(([label, key]) => [label, formatMs(average(key))]), { id: 'category-averages' }),
    h('h3', {}, 'Op placement'),
    properties(placement),
  ];
}

function environment(env) {
  return properties([
    ['Hosts', `${env.hosts.length}: ${env.hosts.join(', ')}`],
    ['Device type', env.device_type],
    // A CPU-only profile has no device cores to count.
    env.device_core_count > 0 ? ['Device cores', String(env.device_core_count)] : null,
    // XProf marks training by its own signs; their absence does not make a job inference.
    ['Job', env.is_training ? 'training' : 'training not detected'],
  ].filter((row) => row !== null), { id: 'environment' });
}

function precision(result) {
  const half = result.device_compute_16bit_percent;
  const single = result.device_compute_32bit_percent;
  const note = result.precision_statement ? notesBlock([result.precision_statement]) : null;
  if (half + single <= 0) return [h('p', { class: 'chart-empty' }, 'No device compute time in this profile.'), note];
  return [pieChart({
    title: 'Share of device compute time',
    slices: [{ label: '16-bit', value: half }, { label: '32-bit', value: single }],
    format: (v) => formatPercent(v),
  }), note];
}

function recommendations(section, steps) {
  return section ? section.notes : [steps.summary_next_step].filter(Boolean);
}

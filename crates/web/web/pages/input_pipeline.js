// The input pipeline analyzer: summary, device-side step graph and statistics,
// host-side breakdown (tf.data input ops on XSpace, DataLoader stages on PyTorch
// traces) and recommendations.

import { append, h } from '../lib/dom.js';
import { formatMs, formatPercent, formatUs } from '../lib/format.js';
import { card, remainingSections, sectionCard, sectionPicker } from '../components/report_view.js';
import { notesBlock } from '../components/rich_text.js';
import { keyFigures } from '../components/stats.js';
import { pieChart } from '../charts/pie.js';
import { inputTone, stepTimeChart } from './step_chart.js';


/** XProf's host-side input time categories (`input_time_breakdown`, µs). */
const HOST_INPUT_CATEGORIES = [
  ['Enqueuing data', 'enqueue_us'],
  ['Reading data from files in advance', 'advanced_file_read_us'],
  ['Reading data from files on demand', 'demanded_file_read_us'],
  ['Data preprocessing', 'preprocessing_us'],
  ['Other data reading or processing', 'unclassified_non_enqueue_us'],
];

/** Renders the analysis in `answer`. */
export function render(root, answer, ctx) {
  const { report, result } = answer;
  const { take, used } = sectionPicker(report);
  const summary = take('Summary');
  const steps = take('Step time by category');
  const hostSide = take('Host-side analysis');
  const dataloader = take('DataLoader');
  const recommendations = take('Recommendations');

  const time = result.step_time_ms;
  const input = result.category_ms.find(([key]) => key === 'infeedTimeMs');
  const figures = keyFigures([
    { label: 'Average step time', text: formatMs(time.average), value: time.average, tone: 'highlight' },
    { label: 'Standard deviation', text: formatMs(time.standard_deviation), value: time.standard_deviation },
    { label: 'Minimum', text: formatMs(time.minimum), value: time.minimum },
    { label: 'Maximum', text: formatMs(time.maximum), value: time.maximum },
    { label: 'Waiting for input', text: formatPercent(result.bottleneck.input_percent), value: result.bottleneck.input_percent, tone: inputTone(result.bottleneck.input_percent) },
    input ? { label: 'Average input time', text: formatMs(input[1].average), value: input[1].average } : null,
  ].filter(Boolean), { id: 'step-statistics' });

  append(root, [
    card('Summary', [notesBlock(summary ? summary.notes : []), figures, notesBlock(result.warnings)], { id: 'summary' }),
    steps
      ? sectionCard({ ...steps, title: 'Device-side analysis: step time by category (ms)' }, ctx, { before: stepTimeChart(result.steps, { splitInput: true }) })
      : null,
    hostSide ? sectionCard(hostSide, ctx, { before: hostBreakdown(result.input_time_breakdown) }) : null,
    dataloader ? sectionCard(dataloader, ctx, { before: dataloaderChart(result.dataloader) }) : null,
    recommendations ? card(recommendations.title, notesBlock(recommendations.notes, 'notes recommendations'), { id: 'recommendations' }) : null,
    ...remainingSections(report, ctx, used),
  ]);
}

function hostBreakdown(breakdown) {
  if (!breakdown) return null;
  return h('div', { class: 'chart-row' }, pieChart({
    title: 'Input time on the host by category',
    slices: HOST_INPUT_CATEGORIES.map(([label, key]) => ({ label, value: breakdown[key] || 0 })),
    format: formatUs,
    empty: 'No input time was recorded on the host.',
  }));
}

function dataloaderChart(dataloader) {
  if (!dataloader || !dataloader.stages) return null;
  return h('div', { class: 'chart-row' }, pieChart({
    title: 'DataLoader time by stage',
    slices: dataloader.stages.map((stage) => ({ label: stage.stage, value: stage.time_ms })),
    format: formatMs,
    empty: 'No DataLoader stage was recorded.',
  }));
}

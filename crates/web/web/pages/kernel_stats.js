// Kernel stats: total kernel time by kernel name and by op (pies) and the kernel table.

import { append, h } from '../lib/dom.js';
import { formatDuration } from '../lib/format.js';
import { remainingSections, sectionCard, sectionsStarting } from '../components/report_view.js';
import { groupSum, pieChart } from '../charts/pie.js';

const duration = (ns) => formatDuration(ns * 1000);

/** Renders the kernel statistics in `answer`. */
export function render(root, answer, ctx) {
  const { report, result } = answer;
  const [section] = sectionsStarting(report, 'Kernel stats');
  const kernels = result.kernels || [];
  const pie = (title, key) => pieChart({
    title,
    slices: groupSum(kernels, key, (kernel) => kernel.total_duration_ns),
    format: duration,
    empty: 'No GPU kernels in this profile.',
  });
  const chart = h('div', { class: 'chart-row', id: 'kernel-pies' },
    pie('Total kernel time by kernel name', (kernel) => kernel.name),
    pie('Total kernel time by op', (kernel) => kernel.op_name || '(no op)'));
  append(root, [
    section ? sectionCard(section, ctx, { before: chart }) : chart,
    ...remainingSections(report, ctx, new Set([section])),
  ]);
}

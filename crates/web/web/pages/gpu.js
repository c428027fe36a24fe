// HTA's GPU analyses on PyTorch traces: every report section, with charts for the
// temporal breakdown per rank, the idle time per stream by cause and the GPU time
// by kernel type.

import { append } from '../lib/dom.js';
import { formatUs } from '../lib/format.js';
import { sectionsWithCharts } from '../components/report_view.js';
import { stackedColumns } from '../charts/columns.js';
import { pieChart } from '../charts/pie.js';

const IDLE_CATEGORIES = [
  ['host_wait', 'Host wait', '#db4437'],
  ['kernel_wait', 'Kernel wait', '#f4b400'],
  ['other', 'Other', '#9e9e9e'],
];

function temporal(result) {
  const rows = result.temporal_breakdown || [];
  return stackedColumns({
    title: 'Temporal breakdown per rank',
    columns: rows.map((row) => `rank ${row.rank}`),
    series: [
      { label: 'Compute', color: '#4285f4', values: rows.map((row) => row.compute_time_us / 1000) },
      { label: 'Non-compute', color: '#ab47bc', values: rows.map((row) => row.non_compute_time_us / 1000) },
      { label: 'Idle', color: '#bdbdbd', values: rows.map((row) => row.idle_time_us / 1000) },
    ],
    yLabel: 'Time (ms)',
    format: (ms) => formatUs(ms * 1000),
    details: (i) => [['Idle', `${rows[i].idle_time_pctg}%`], ['Compute', `${rows[i].compute_time_pctg}%`], ['Non-compute', `${rows[i].non_compute_time_pctg}%`]],
  });
}

function idle(result) {
  const rows = result.idle_time_breakdown || [];
  const streams = [...new Set(rows.map((row) => `${row.rank}/${row.stream}`))];
  const value = (stream, category) => {
    const row = rows.find((r) => `${r.rank}/${r.stream}` === stream && r.idle_category === category);
    return row ? row.idle_time_us / 1000 : 0;
  };
  return stackedColumns({
    title: 'Idle time per stream by cause',
    columns: streams.map((stream) => { const [rank, id] = stream.split('/'); return `r${rank} s${id}`; }),
    series: IDLE_CATEGORIES.map(([key, label, color]) => ({ label, color, values: streams.map((stream) => value(stream, key)) })),
    yLabel: 'Idle time (ms)',
    format: (ms) => formatUs(ms * 1000),
  });
}

function kernelTypes(result) {
  const types = (result.kernel_breakdown && result.kernel_breakdown.kernel_types) || [];
  return pieChart({ title: 'GPU time by kernel type', slices: types.map((t) => ({ label: t.kernel_type, value: t.sum_us })), format: formatUs });
}

/** Renders the GPU analyses in `answer`. */
export function render(root, answer, ctx) {
  const { report, result } = answer;
  append(root, [...sectionsWithCharts(report, ctx, [
    ['Temporal breakdown', () => temporal(result)],
    ['Idle time breakdown', () => idle(result)],
    ['GPU time by kernel type', () => kernelTypes(result)],
  ])]);
}

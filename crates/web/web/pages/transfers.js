// The transfers and synchronisation diagnosis: every report section, with charts
// for the time lost per finding kind, the GPU gaps by cause and the achieved copy
// bandwidth.

import { append } from '../lib/dom.js';
import { formatNumber, formatDuration } from '../lib/format.js';
import { sectionsWithCharts } from '../components/report_view.js';
import { stackedColumns } from '../charts/columns.js';
import { groupSum, pieChart } from '../charts/pie.js';

function timeLost(result) {
  return pieChart({
    title: 'Time lost by finding kind',
    slices: groupSum(result.findings || [], (finding) => finding.kind, (finding) => finding.time_lost_ps),
    format: formatDuration,
    empty: 'No findings.',
  });
}

function gapCauses(result) {
  const causes = (result.hosts || []).flatMap((host) => host.gaps.flatMap((gaps) => gaps.by_cause.map(([cause, count, total]) => ({ cause, count, total }))));
  return pieChart({
    title: 'GPU gap time by cause',
    slices: groupSum(causes, (entry) => entry.cause.replaceAll('_', ' '), (entry) => entry.total),
    format: formatDuration,
    empty: 'No GPU gap above the threshold.',
  });
}

function bandwidth(result) {
  const rows = (result.hosts || []).flatMap((host) => host.copy_bandwidth.map((copy) => ({ ...copy, host: host.host })));
  return stackedColumns({
    title: 'Achieved copy bandwidth',
    columns: rows.map((row) => `${row.kind} (GPU ${row.device})`),
    series: [{ label: 'Achieved (GB/s)', color: '#4285f4', values: rows.map((row) => row.achieved_gbps) }],
    yLabel: 'GB/s',
    format: (value) => `${formatNumber(value, 2)} GB/s`,
    details: (i) => [['Host', rows[i].host], ['Copies', String(rows[i].count)], ['Bytes', formatNumber(rows[i].bytes)], ['Peak', rows[i].peak_gbps === null ? rows[i].peak_source : `${formatNumber(rows[i].peak_gbps, 1)} GB/s`]],
    empty: 'No copies.',
  });
}

/** Renders the diagnosis in `answer`. */
export function render(root, answer, ctx) {
  const { report, result } = answer;
  append(root, [...sectionsWithCharts(report, ctx, [
    ['Findings', () => timeLost(result)],
    ['GPU gaps by cause', () => gapCauses(result)],
    ['Copy bandwidth', () => bandwidth(result)],
  ])]);
}

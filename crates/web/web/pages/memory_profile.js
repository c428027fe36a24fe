// The memory profile: per allocator (memory id) a summary, the timeline of stack,
// heap and free memory with fragmentation on a second axis (hover details per
// point), and the breakdown of live allocations at the peak. On PyTorch traces
// the lines are allocated, reserved and free memory; on PyTorch memory snapshots a
// point's details name the allocating stack, and the snapshot's own tables
// (memory by stack, fragmentation, OOMs, …) follow as report sections.

import { append, h } from '../lib/dom.js';
import { formatBytes, formatNumber, formatPercent } from '../lib/format.js';
import { card, remainingSections, sectionCard } from '../components/report_view.js';
import { notesBlock } from '../components/rich_text.js';
import { keyFigures } from '../components/stats.js';
import { lineChart } from '../charts/lines.js';
import { dataTable } from '../components/data_table.js';

const MIB = 1024 * 1024;
const msOf = (ps) => ps / 1e9;
const msText = (ps) => `${formatNumber(msOf(ps), 3)} ms`;
const fraction = (value) => (Number.isFinite(value) ? value : 0);

/** Every (host, allocator) pair of the result, with a key for the URL. */
function allocators(result) {
  return result.flatMap((entry) => entry.profile.allocators.map((allocator) => ({
    host: entry.host, allocator, key: `${entry.host}/${allocator.memory_id}`, method: entry.profile.method,
  })));
}

/** Renders the memory profile in `answer`. */
export function render(root, answer, ctx) {
  const { report, result } = answer;
  const all = allocators(result);
  const several = result.length > 1;
  const hostTitle = (host, title) => (several ? `${host} — ${title}` : title);
  if (all.length === 0) {
    append(root, [...remainingSections(report, ctx)]);
    return;
  }
  const chosen = all.find((a) => a.key === ctx.params.get('allocator')) || all[0];
  const used = new Set(report.sections.filter((section) => section.title.includes('Memory timeline (')));
  const summarySections = report.sections.filter((section) => section.title.endsWith('Memory profile summary'));
  summarySections.forEach((section) => used.add(section));
  const summarySection = summarySections.find((section) => section.title === hostTitle(chosen.host, 'Memory profile summary'));
  const timelineSection = report.sections.find((section) => section.title === hostTitle(chosen.host, `Memory timeline (${chosen.allocator.memory_id})`));

  const selector = all.length > 1 ? h('div', { class: 'controls' }, h('label', {}, 'Memory ID',
    h('select', {
      id: 'allocator-select',
      onChange: (event) => { ctx.setParams({ allocator: event.target.value }); root.replaceChildren(); render(root, answer, ctx); },
    }, all.map((a) => h('option', { value: a.key, selected: a === chosen }, several ? `${a.host}: ${a.allocator.memory_id}` : a.allocator.memory_id))))) : null;

  append(root, [
    selector,
    card(`Memory profile summary (${chosen.allocator.memory_id})`, [
      summaryFigures(chosen.allocator),
      notesBlock(summarySection ? summarySection.notes : []),
      summarySection && summarySection.table ? dataTable({ columns: summarySection.table.columns, rows: summarySection.table.rows, caption: summarySection.title, lead: summarySection.table.key_columns }).element : null,
    ], { id: 'memory-summary' }),
    card(`Memory timeline graph (${chosen.allocator.memory_id})`, [
      timelineChart(chosen.allocator, Boolean(result.find((entry) => entry.host === chosen.host)?.profile.snapshot)),
      notesBlock(timelineSection ? timelineSection.notes : []),
      timelineSection && timelineSection.table ? h('details', { class: 'timeline-table' }, h('summary', {}, `Timeline events (${timelineSection.table.rows.length})`),
        dataTable({ columns: timelineSection.table.columns, rows: timelineSection.table.rows, caption: timelineSection.title, pageSize: 25 }).element) : null,
    ], { id: 'memory-timeline' }),
    ...report.sections.filter((section) => !used.has(section)).map((section) => sectionCard(section, ctx)),
  ]);
}

function summaryFigures(allocator) {
  const { summary } = allocator;
  const peak = summary.peak_stats;
  const pytorch = Boolean(allocator.pytorch);
  const figures = [
    { label: 'Peak memory usage', text: formatBytes(peak.peak_bytes_in_use || peak.heap_allocated_bytes + peak.stack_reserved_bytes), value: peak.peak_bytes_in_use, tone: 'highlight' },
    { label: 'Time of the peak', text: msText(summary.peak_stats_time_ps), value: msOf(summary.peak_stats_time_ps) },
    { label: 'Peak step', text: String(allocator.peak_step_id), value: allocator.peak_step_id },
    pytorch ? null : { label: 'Memory capacity', text: formatBytes(summary.memory_capacity_bytes), value: summary.memory_capacity_bytes },
    pytorch ? null : { label: 'Peak heap usage (lifetime)', text: formatBytes(summary.peak_bytes_usage_lifetime), value: summary.peak_bytes_usage_lifetime },
    { label: '#Allocations', text: formatNumber(allocator.total_allocations), value: allocator.total_allocations },
    { label: pytorch ? '#Frees' : '#Deallocations', text: formatNumber(allocator.total_deallocations), value: allocator.total_deallocations },
    pytorch ? { label: 'Reserved at peak', text: formatBytes(allocator.pytorch.reserved_at_peak_bytes), value: allocator.pytorch.reserved_at_peak_bytes } : { label: 'Stack reservation at peak', text: formatBytes(peak.stack_reserved_bytes), value: peak.stack_reserved_bytes },
    { label: pytorch ? 'Allocated at peak' : 'Heap allocation at peak', text: formatBytes(peak.heap_allocated_bytes), value: peak.heap_allocated_bytes },
    { label: 'Free memory at peak', text: formatBytes(peak.free_memory_bytes), value: peak.free_memory_bytes },
    { label: 'Fragmentation at peak', text: formatPercent(fraction(peak.fragmentation) * 100, 2), value: fraction(peak.fragmentation) * 100 },
  ];
  return keyFigures(figures.filter(Boolean), { id: 'memory-figures' });
}

function timelineChart(allocator, snapshot) {
  const points = allocator.timeline;
  const pytorch = Boolean(allocator.pytorch);
  const stat = (key) => points.map((point) => Number(point.stats[key]) || 0);
  const series = pytorch
    ? [
      { label: 'Allocated', values: stat('heap_allocated_bytes'), color: '#4285f4' },
      { label: 'Reserved', values: stat('reserved_bytes'), color: '#0f9d58' },
      { label: 'Free (reserved − allocated)', values: stat('free_memory_bytes'), color: '#f4b400' },
    ]
    : [
      { label: 'Stack', values: stat('stack_reserved_bytes'), color: '#ab47bc' },
      { label: 'Heap', values: stat('heap_allocated_bytes'), color: '#4285f4' },
      // Free memory dwarfs the rest on hosts with much RAM; shown on demand.
      { label: 'Free', values: stat('free_memory_bytes'), color: '#f4b400', hidden: points.some((p) => p.stats.free_memory_bytes > 20 * Math.max(1, p.stats.heap_allocated_bytes + p.stats.stack_reserved_bytes)) },
    ];
  return lineChart({
    title: 'Memory over time',
    x: points.map((point) => msOf(point.time_ps)),
    xLabel: 'Time (ms)',
    left: { label: 'Memory (MiB)', scale: MIB, series },
    right: { label: 'Fragmentation (%)', max: 100, series: [{ label: 'Fragmentation', values: points.map((p) => fraction(p.stats.fragmentation) * 100), color: '#db4437' }] },
    details: (i) => pointDetails(points[i], pytorch, snapshot),
    steps: true,
  });
}

function pointDetails(point, pytorch, snapshot) {
  const { activity, stats } = point;
  return [
    `${activity.kind} at ${msText(point.time_ps)}`,
    [snapshot ? 'Stack' : 'Op', activity.tf_op_name || '—'],
    ['Step', String(activity.step_id)],
    ['Size', formatBytes(activity.allocation_bytes)],
    pytorch ? null : ['Requested', formatBytes(activity.requested_bytes)],
    snapshot ? null : ['Shape', activity.tensor_shape || '—'],
    snapshot ? null : ['Data type', activity.data_type || '—'],
    activity.region_type ? ['Region', activity.region_type] : null,
    pytorch ? ['Allocated', formatBytes(stats.heap_allocated_bytes)] : ['Heap', formatBytes(stats.heap_allocated_bytes)],
    pytorch ? ['Reserved', formatBytes(stats.reserved_bytes)] : ['Stack', formatBytes(stats.stack_reserved_bytes)],
    ['Free', formatBytes(stats.free_memory_bytes)],
    ['Fragmentation', formatPercent(fraction(stats.fragmentation) * 100, 2)],
  ].filter(Boolean);
}

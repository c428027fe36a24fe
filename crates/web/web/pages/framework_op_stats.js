// Framework op stats: the four pies (host/device × op/op type, total self time),
// include/exclude IDLE (excluded by default, as in the TF Profiler), and the op
// table with sorting, filtering and Export CSV.

import { append, clear, h } from '../lib/dom.js';
import { formatUs } from '../lib/format.js';
import { card, mainTable, remainingSections, sectionsStarting } from '../components/report_view.js';
import { notesBlock } from '../components/rich_text.js';
import { segmented } from '../components/segmented.js';
import { groupSum, pieChart } from '../charts/pie.js';

const round = (value, decimals) => Number(value.toFixed(decimals));

/**
 * The op table of one variant (`with_idle` or `without_idle`) as report rows, with
 * the main table's columns and rounding (µs to 3 decimals, percentages to 2).
 */
function tableRows(variant) {
  return variant.rows.map((row) => {
    const device = row.host_or_device === 'Device';
    const share = device ? row.device_self_time_fraction : row.host_self_time_fraction;
    const cumulative = device ? row.device_cumulative_self_time_fraction : row.host_cumulative_self_time_fraction;
    return [row.rank, row.host_or_device, row.op_type, row.op_name, row.occurrences,
      round(row.total_time_us, 3), round(row.avg_time_us, 3), round(row.total_self_time_us, 3), round(row.avg_self_time_us, 3),
      round(share * 100, 2), round(cumulative * 100, 2), row.is_eager ? 'yes' : 'no'];
  });
}

function pies(rows) {
  const side = (where) => rows.filter((row) => row.host_or_device === where);
  const pie = (title, where, key) => pieChart({
    title,
    slices: groupSum(side(where), key, (row) => row.total_self_time_us),
    format: formatUs,
    empty: `No ${where.toLowerCase()} ops in this profile.`,
  });
  return h('div', { class: 'chart-row', id: 'op-pies' },
    pie('On device: total self-time (grouped by type)', 'Device', (row) => row.op_type),
    pie('On device: total self-time', 'Device', (row) => row.op_name),
    pie('On host: total self-time (grouped by type)', 'Host', (row) => row.op_type),
    pie('On host: total self-time', 'Host', (row) => row.op_name));
}

/** Renders the op statistics in `answer`. */
export function render(root, answer, ctx) {
  const { report, result } = answer;
  const [section] = sectionsStarting(report, 'Framework op statistics');
  const columns = section && section.table ? section.table.columns : [];
  const charts = h('div');
  const table = h('div');
  let idle = ctx.params.get('idle') === 'include' ? 'include' : 'exclude';

  function show() {
    const variant = idle === 'include' ? result.with_idle : result.without_idle;
    clear(charts).append(pies(variant.rows));
    const lead = section && section.table ? section.table.key_columns : [];
    clear(table).append(mainTable(ctx, { columns, rows: tableRows(variant), caption: 'Framework op statistics', lead }).element);
  }

  append(root, [
    card('Framework op statistics', [
      notesBlock([
        'In the charts and the table, "IDLE" is the time the host (or device) was idle. In the pie charts, "Other" sums the slices too small to show.',
        ...(section ? section.notes.filter((note) => !note.startsWith('Ops ranked')) : []),
        `Task type: ${result.with_idle.task_type}; architecture: ${result.with_idle.architecture_type}. Export CSV downloads the whole table as \`mlprof analyze --format csv\` writes it (IDLE rows included), in the order shown.`,
      ]),
      h('div', { class: 'controls' }, h('label', {}, 'Include IDLE time in statistics',
        segmented({
          label: 'Include IDLE time', id: 'idle-toggle', value: idle,
          options: [{ value: 'exclude', label: 'No' }, { value: 'include', label: 'Yes' }],
          onSelect: (value) => { idle = value; ctx.setParams({ idle: value === 'include' ? 'include' : null }); show(); },
        }))),
      charts,
    ], { id: 'op-charts' }),
    card('Operations', table, { id: 'section-framework_op_statistics', className: 'main-section' }),
    ...remainingSections(report, ctx, new Set([section])),
  ]);
  show();
}

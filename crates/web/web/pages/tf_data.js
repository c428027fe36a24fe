// tf.data bottleneck analysis: summary, the bottleneck and pipeline tables, and
// the iterator graph of a pipeline's slowest call with the critical path in bold
// and the bottleneck iterator in red.

import { append, clear, h } from '../lib/dom.js';
import { formatDuration } from '../lib/format.js';
import { card, remainingSections, sectionCard, sectionPicker } from '../components/report_view.js';
import { notesBlock } from '../components/rich_text.js';
import { dataTable } from '../components/data_table.js';
import { treeGraph } from '../charts/tree.js';

/** Every pipeline of every host with a key for the URL, slowest call first. */
function pipelines(result) {
  return result.hosts.flatMap((host) => host.pipelines.map((pipeline) => ({ host, pipeline, key: `${host.host}/${pipeline.name}` })))
    .filter((entry) => entry.pipeline.calls.length > 0)
    .sort((a, b) => b.pipeline.max_latency_ps - a.pipeline.max_latency_ps);
}

/**
 * The iterator tree of one call: the pipeline's root iterator and, below each
 * iterator, the iterators of the call whose parent it is.
 */
export function iteratorTree(host, pipeline, call) {
  const meta = new Map(host.iterators.map((iterator) => [String(iterator.id), iterator]));
  const stats = new Map(call.iterators.map((iterator) => [String(iterator.id), iterator]));
  const bottleneck = String(call.bottleneck_iterator_id);
  const rootId = String(pipeline.id);
  const seen = new Set();
  function node(id) {
    seen.add(id);
    const info = meta.get(id) || { name: id, long_name: id };
    const stat = stats.get(id);
    const children = call.iterators
      .map((iterator) => String(iterator.id))
      .filter((child) => child !== rootId && !seen.has(child) && meta.has(child) && String(meta.get(child).parent_id) === id)
      .map(node);
    const blocking = Boolean(stat && stat.is_blocking);
    const isBottleneck = id === bottleneck && stat && stat.self_time_ps > 0;
    const classes = [blocking ? 'blocking' : null, isBottleneck ? 'bottleneck' : null].filter(Boolean);
    return {
      id,
      title: info.name,
      subtitle: stat ? `total ${formatDuration(stat.duration_ps)} · self ${formatDuration(stat.self_time_ps)}` : '',
      classes,
      label: `${info.long_name}${isBottleneck ? ' (bottleneck)' : blocking ? ' (critical path)' : ''}`,
      details: () => [
        info.long_name,
        ['Total', stat ? formatDuration(stat.duration_ps) : '—'],
        ['Self', stat ? formatDuration(stat.self_time_ps) : '—'],
        ['Calls', stat ? String(stat.num_calls) : '—'],
        ['Critical path', blocking ? 'yes' : 'no'],
        ['Asynchronous', info.is_async ? 'yes' : 'no'],
        isBottleneck ? ['Bottleneck', 'yes'] : null,
      ].filter(Boolean),
      children,
    };
  }
  return node(rootId);
}

/** Renders the tf.data analysis in `answer`. */
export function render(root, answer, ctx) {
  const { report, result } = answer;
  const { take, used } = sectionPicker(report);
  const summary = take('tf.data summary');
  const bottlenecks = take('Bottlenecks');
  const pipelineSection = take('Input pipelines');
  const graphSection = take('Iterator graph');
  const all = pipelines(result);
  const graph = h('div', { id: 'iterator-graph' });
  const chosenKey = ctx.params.get('pipeline');
  let chosen = all.find((entry) => entry.key === chosenKey) || all[0];

  function showGraph() {
    clear(graph);
    if (!chosen) {
      graph.append(h('p', { class: 'chart-empty' }, 'No tf.data input pipeline with a recorded call.'));
      return;
    }
    const call = chosen.pipeline.calls[0];
    graph.append(
      notesBlock([`The slowest call of ${chosen.pipeline.name} on ${chosen.host.host} took ${formatDuration(call.latency_ps)}; ${chosen.pipeline.num_slow_calls} of ${chosen.pipeline.num_calls} calls were slower than 50 µs.`]),
      treeGraph({
        title: `Iterators of the slowest call of ${chosen.pipeline.name}`,
        root: iteratorTree(chosen.host, chosen.pipeline, call),
        legendItems: [{ className: 'blocking', label: 'critical path (blocking)' }, { className: 'bottleneck', label: 'bottleneck' }, { className: '', label: 'other iterator' }],
      }));
  }

  const selector = all.length > 1 ? h('div', { class: 'controls' }, h('label', {}, 'Input pipeline', h('select', {
    id: 'pipeline-select',
    onChange: (event) => { chosen = all.find((entry) => entry.key === event.target.value); ctx.setParams({ pipeline: chosen.key }); showGraph(); },
  }, all.map((entry) => h('option', { value: entry.key, selected: entry === chosen }, `${entry.host.host}: ${entry.pipeline.name} (${entry.pipeline.kind})`))))) : null;

  append(root, [
    card('tf.data summary', [notesBlock(summary ? summary.notes : [result.summary])], { id: 'tf-data-summary' }),
    bottlenecks ? sectionCard(bottlenecks, ctx) : null,
    pipelineSection ? sectionCard(pipelineSection, ctx) : null,
    card('Iterator graph', [
      notesBlock(graphSection ? graphSection.notes : []),
      selector,
      graph,
      graphSection && graphSection.table && graphSection.table.rows.length
        ? h('details', { class: 'timeline-table' }, h('summary', {}, 'Iterators as a table'),
          dataTable({ columns: graphSection.table.columns, rows: graphSection.table.rows, caption: graphSection.title, pageSize: 25 }).element)
        : null,
    ], { id: 'iterator-graph-card' }),
    ...remainingSections(report, ctx, used),
  ]);
  showGraph();
}

// tf.data bottleneck analysis: the bottleneck table equals the report's, and the
// iterator graph of the slowest pipeline's slowest call draws every iterator of the
// call, the critical path in bold and the bottleneck iterator in red.

import { assertRowsMatch, mainSection, openToolPage, readTable } from '../lib/ui.mjs';

export default async function (t) {
  const { page, assert } = t;
  const { result, report } = await openToolPage(t, 'tf_data_bottleneck_analysis');

  const main = mainSection(report);
  assertRowsMatch(assert, (await readTable(page.locator('#main-table'))).rows, main.table.rows.slice(0, 100), 'bottlenecks');

  const slowest = result.hosts.flatMap((host) => host.pipelines.map((pipeline) => ({ host, pipeline })))
    .filter(({ pipeline }) => pipeline.calls.length > 0)
    .sort((a, b) => b.pipeline.max_latency_ps - a.pipeline.max_latency_ps)[0];
  if (!slowest) {
    assert.equal(await page.locator('#iterator-graph .chart-empty').count(), 1, 'no pipeline: the graph says so');
    return;
  }
  const call = slowest.pipeline.calls[0];
  const graph = page.locator('#iterator-graph svg');
  assert.equal(await graph.locator('g.node').count(), call.iterators.length, 'one node per iterator of the slowest call');
  assert.equal(await graph.locator('g.node.blocking').count(), call.iterators.filter((it) => it.is_blocking).length, 'the critical path is bold');
  const bottleneck = result.bottlenecks.find((b) => b.host === slowest.host.host && b.input_pipeline === slowest.pipeline.name);
  const red = graph.locator('g.node.bottleneck');
  assert.equal(await red.count(), 1, 'one bottleneck node');
  assert.equal(await red.locator('text.name').textContent(), bottleneck.iterator_name, 'the bottleneck is the reported iterator');
  assert.equal(await red.locator('rect').evaluate((rect) => getComputedStyle(rect).stroke), 'rgb(198, 40, 40)', 'drawn in red');
  assert.equal(await graph.locator('path.edge').count(), call.iterators.length - 1, 'one edge into every iterator but the root');
  await t.screenshot('tf_data_bottleneck_analysis-graph');
}

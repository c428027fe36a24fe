// The python tool: a flame graph (an icicle) of the sampled Python stacks from
// `/api/python/flame`, for one thread or all, one step or the whole recording, with or
// without waiting threads' samples, above the tool's report tables. The choices and
// the zoomed frame live in the URL (`thread`, `step`, `idle`, `focus` — the zoomed
// frame as child indices from the root, `0.2.1`), so a view is a link.

import { append, clear, h } from '../lib/dom.js';
import { getJson } from '../lib/api.js';
import { formatMs, formatNumber, formatPercent } from '../lib/format.js';
import { card, remainingSections } from '../components/report_view.js';
import { hideTooltip } from '../charts/common.js';
import { flameGraph, frameLabel } from '../charts/flame.js';

/** Renders the flame graph, then the report's sections; resolves once the graph is drawn. */
export async function render(root, answer, ctx) {
  const view = flameView(ctx, answer.result ? answer.result.sample_interval_ms : 0);
  append(root, [card('Flame graph', view.element, { id: 'python-flame' }), ...remainingSections(answer.report, ctx)]);
  await view.load();
  return view.destroy;
}

/** `focus=0.2.1` as child indices. */
function parseFocus(text) {
  return (text || '').split('.').filter((part) => /^\d+$/.test(part)).map(Number);
}

/** What names a frame across answers (indices change with the filter). */
function keyOf(node) {
  return `${node.name}\u0000${node.file}\u0000${node.line}`;
}

function option(value, label, selected) {
  return h('option', { value, selected }, label);
}

/** The flame graph's controls, breadcrumb and chart, and how it loads and redraws. */
function flameView(ctx, intervalMs) {
  const params = ctx.params;
  const state = { thread: params.get('thread') || '', step: params.get('step') || '', idle: params.get('idle') === '1' };
  let flame = null;
  let path = [];
  let parents = new WeakMap();
  let token = 0;
  let resizeTimer = null;

  const threadSelect = h('select', { id: 'flame-thread', onChange: () => choose({ thread: threadSelect.value }) });
  const stepSelect = h('select', { id: 'flame-step', onChange: () => choose({ step: stepSelect.value }) });
  const idleBox = h('input', { type: 'checkbox', id: 'flame-idle', checked: state.idle, onChange: () => choose({ idle: idleBox.checked }) });
  const crumbs = h('nav', { class: 'flame-path', id: 'flame-path', 'aria-label': 'Zoomed frame and its callers' });
  const reset = h('button', { type: 'button', id: 'flame-reset', onClick: () => zoomOut(0) }, 'Reset zoom');
  const summary = h('p', { class: 'flame-summary', id: 'flame-summary' });
  const chart = h('div', { class: 'flame-chart', id: 'flame-chart', dataset: { state: 'loading' } });
  const element = h('div', { class: 'flame-view' },
    h('div', { class: 'controls' },
      h('label', {}, 'Thread', threadSelect),
      h('label', {}, 'Step', stepSelect),
      h('label', { title: 'Count the samples of threads that were waiting (sleeping, blocked), not only running ones' }, idleBox, 'Include waiting threads')),
    summary,
    h('div', { class: 'flame-nav' }, crumbs, reset),
    chart);

  function query() {
    return { run: ctx.run, host: ctx.host, thread: state.thread || undefined, step: state.step || undefined, idle: state.idle ? '1' : undefined };
  }

  /** Applies a change of thread, step or waiting threads, keeping the zoomed frame where it still is. */
  function choose(changes) {
    Object.assign(state, changes);
    ctx.setParams({ thread: state.thread, step: state.step, idle: state.idle ? '1' : null });
    return load(path.slice(1).map(keyOf));
  }

  /** Asks for the graph and draws it, zoomed by `keys` (frames from the root) or by the URL's `focus`. */
  async function load(keys = null) {
    const mine = ++token;
    chart.dataset.state = 'loading';
    let answer;
    try {
      answer = await getJson('/api/python/flame', query());
    } catch (error) {
      if (mine !== token) return;
      if (state.thread || state.step) {
        // A thread or step this run does not have (an old link): show everything.
        Object.assign(state, { thread: '', step: '' });
        ctx.setParams({ thread: null, step: null, focus: null });
        await load();
        summary.prepend(h('span', { class: 'flame-warning' }, `${error.message}. `));
        return;
      }
      clear(chart).append(h('p', { class: 'chart-empty' }, error.message));
      chart.dataset.state = 'error';
      return;
    }
    if (mine !== token) return;
    flame = answer;
    parents = new WeakMap();
    const pending = [flame.root];
    while (pending.length) {
      const node = pending.pop();
      for (const child of node.children) {
        parents.set(child, node);
        pending.push(child);
      }
    }
    path = [flame.root];
    if (keys) {
      for (const key of keys) {
        const next = path[path.length - 1].children.find((child) => keyOf(child) === key);
        if (!next) break;
        path.push(next);
      }
    } else {
      for (const index of parseFocus(ctx.params.get('focus'))) {
        const next = path[path.length - 1].children[index];
        if (!next) break;
        path.push(next);
      }
    }
    fillSelectors();
    draw();
  }

  function fillSelectors() {
    const shown = (t) => (state.idle ? t.samples : t.running_samples);
    clear(threadSelect).append(option('', 'All threads', !state.thread),
      ...flame.threads.map((t) => option(t.name, `${t.name} — ${formatNumber(shown(t))} samples`, t.name === state.thread || String(t.tid) === state.thread)));
    stepSelect.disabled = flame.steps.length === 0;
    clear(stepSelect).append(flame.steps.length ? option('', 'Whole recording', !state.step) : option('', 'No steps found', true),
      ...flame.steps.map((step) => option(String(step.num), step.name === String(step.num) ? `Step ${step.num}` : step.name, String(step.num) === state.step)));
  }

  function percentOf(samples, whole) {
    return whole > 0 ? formatPercent((100 * samples) / whole) : '—';
  }

  function details(node) {
    const focus = path[path.length - 1];
    const count = (samples) => `${formatNumber(samples)} (${percentOf(samples, flame.total)})`;
    return [
      node.name,
      node.file ? `${node.file}:${node.line}` : null,
      node.merged ? `${formatNumber(node.merged)} frames, each below 0.1 % of the samples` : null,
      ['Self samples', count(node.self)],
      ['Total samples', count(node.total)],
      focus !== flame.root && node !== focus && parents.has(node) ? ['Of the zoomed frame', percentOf(node.total, focus.total)] : null,
      intervalMs > 0 ? ['Total time (≈ samples × interval)', formatMs(node.total * intervalMs)] : null,
    ].filter(Boolean);
  }

  /** Zooms into `node`, drawn at `depth` (a caller of the zoomed frame zooms out to it). */
  function zoom(depth, node) {
    if (depth < path.length) return zoomOut(depth);
    if (node.children.length === 0 && node.merged) return undefined;
    const chain = [];
    for (let at = node; at && at !== path[path.length - 1]; at = parents.get(at)) chain.unshift(at);
    path = [...path, ...chain];
    return draw();
  }

  function zoomOut(depth) {
    path = path.slice(0, depth + 1);
    draw();
  }

  function draw() {
    hideTooltip();
    const focus = path[path.length - 1];
    const indices = path.slice(1).map((node, i) => path[i].children.indexOf(node));
    ctx.setParams({ focus: indices.length ? indices.join('.') : null });
    clear(crumbs).append(...path.map((node, i) => h('button', {
      type: 'button', class: 'crumb', title: frameLabel(node), 'aria-current': i === path.length - 1 ? 'true' : null, onClick: () => zoomOut(i),
    }, node.name)));
    reset.disabled = path.length <= 1;
    const who = state.thread ? flame.root.name : `${flame.threads.length} threads`;
    const step = flame.steps.find((s) => String(s.num) === state.step);
    summary.textContent = `${formatNumber(flame.total)} ${state.idle ? '' : 'running '}samples of ${who}${step ? ` in ${step.name}` : ''}. `
      + 'Width is samples; click a frame to zoom into it, a bar above it to zoom out.';
    if (flame.total === 0) {
      clear(chart).append(h('p', { class: 'chart-empty' }, 'No samples in this selection.'));
    } else {
      const width = Math.max(320, Math.floor(chart.clientWidth || 960));
      clear(chart).append(flameGraph({ path, width, details, onZoom: zoom, title: `Flame graph of ${frameLabel(focus)}` }));
    }
    chart.dataset.state = 'ready';
  }

  function onResize() {
    clearTimeout(resizeTimer);
    resizeTimer = setTimeout(() => { if (flame) draw(); }, 150);
  }
  window.addEventListener('resize', onResize);

  return {
    element,
    load,
    destroy() {
      token += 1;
      clearTimeout(resizeTimer);
      window.removeEventListener('resize', onResize);
      hideTooltip();
    },
  };
}

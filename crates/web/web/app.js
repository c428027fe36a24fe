// mlprof's profiler UI: the run, host and tool selectors (as in TensorBoard's
// Profile tab) and the tool page they choose. The state is the query string
// (lib/url_state.js); every navigation renders from it, so links, reloads and
// back/forward all show the same view.

import { h, clear } from './lib/dom.js';
import { getJson } from './lib/api.js';
import { currentParams, goTo, mergeParams } from './lib/url_state.js';
import { loadPage, toolLabel, usesToolApi } from './pages/registry.js';
import { hideTooltip } from './charts/common.js';

const ALL_HOSTS = 'all';
const DEFAULT_TOOL = 'overview_page';

const elements = {
  run: document.getElementById('run-select'),
  host: document.getElementById('host-select'),
  tool: document.getElementById('tool-select'),
  page: document.getElementById('page'),
  root: document.getElementById('root-path'),
  busy: document.getElementById('busy'),
};

let runs = [];
let teardown = null;
let generation = 0;

/** The run, host and tool the query string asks for, with defaults filled in. */
function resolve(params) {
  const run = runs.find((r) => r.name === params.get('run')) || runs[0];
  const tools = run.tools || [];
  const asked = params.get('tool');
  const tool = tools.includes(asked) ? asked : (tools.includes(DEFAULT_TOOL) ? DEFAULT_TOOL : tools[0]);
  let host = params.get('host') || ALL_HOSTS;
  if (host !== ALL_HOSTS && !run.hosts.includes(host)) host = ALL_HOSTS;
  // The trace viewer shows one host's timeline.
  if (tool === 'trace_viewer' && host === ALL_HOSTS) host = run.hosts[0];
  return { run, host, tool };
}

/**
 * Replaces the entry of the run `name` asks for (or the newest) with `/api/run`'s
 * when its tool list is only what the format can have (`tools_exact: false`).
 */
async function exactTools(name) {
  const index = Math.max(0, runs.findIndex((r) => r.name === name));
  if (runs[index].tools_exact !== false) return;
  try {
    runs[index] = await getJson('/api/run', { run: runs[index].name });
  } catch {
    // The page shows the run's load error when it asks for a tool.
  }
}

function option(value, label, selected) {
  return h('option', { value, selected }, label);
}

function fillSelectors({ run, host, tool }) {
  clear(elements.run).append(...runs.map((r) => option(r.name, r.name, r === run)));
  const hosts = tool === 'trace_viewer' ? run.hosts : [ALL_HOSTS, ...run.hosts];
  clear(elements.host).append(...hosts.map((name) => option(name, name === ALL_HOSTS ? `All hosts (${run.hosts.length})` : name, name === host)));
  clear(elements.tool).append(...run.tools.map((name) => option(name, toolLabel(name), name === tool)));
}

/** Goes to run/host/tool (a new history entry); the page's own state is dropped. */
function navigate(changes) {
  const params = currentParams();
  const next = new URLSearchParams();
  for (const key of ['run', 'host', 'tool']) {
    const value = key in changes ? changes[key] : params.get(key);
    if (value) next.set(key, value);
  }
  if (goTo(next)) render();
}

async function render() {
  const token = ++generation;
  setBusy(true);
  hideTooltip();
  if (teardown) {
    const stop = teardown;
    teardown = null;
    stop();
  }
  const params = currentParams();
  if (runs.length === 0) {
    showMessage('No profiles found', 'The directory holds no profile mlprof can read.');
    setBusy(false);
    return;
  }
  await exactTools(params.get('run'));
  if (token !== generation) return;

  const { run, host, tool } = resolve(params);
  const fixed = new URLSearchParams(params);
  fixed.set('run', run.name);
  fixed.set('host', host);
  fixed.set('tool', tool);
  goTo(fixed, { replace: true });
  fillSelectors({ run, host, tool });
  document.title = `${toolLabel(tool)} · ${run.name} · mlprof`;

  const page = elements.page;
  const ctx = {
    run: run.name,
    host,
    tool,
    hosts: run.hosts,
    format: run.format,
    /** The query string now (a page's own state included). */
    get params() { return currentParams(); },
    /** Merges a page's view state into the URL (no new history entry). */
    setParams: (changes) => { if (token === generation) mergeParams(changes); },
  };
  const body = h('div', { class: 'page-body' });
  clear(page).append(
    h('header', { class: 'page-header' },
      h('h1', {}, toolLabel(tool)),
      h('p', { class: 'page-context' }, `${run.name} · ${host === ALL_HOSTS ? `all hosts (${run.hosts.join(', ')})` : host}`)),
    body);
  try {
    const module = await loadPage(tool);
    const answer = usesToolApi(tool) ? await getJson('/api/tool', { run: run.name, host, tool }) : null;
    if (token !== generation) return;
    const cleanup = answer ? await module.render(body, answer, ctx) : await module.mount(body, ctx);
    if (token === generation) teardown = cleanup || null;
    else if (cleanup) cleanup();
  } catch (error) {
    if (token === generation) body.replaceChildren(errorCard(error));
  } finally {
    if (token === generation) setBusy(false);
  }
}

function setBusy(busy) {
  elements.busy.hidden = !busy;
  elements.page.setAttribute('aria-busy', String(busy));
}

function errorCard(error) {
  return h('section', { class: 'card error', role: 'alert' }, h('h2', {}, 'Could not show this page'), h('p', {}, error && error.message ? error.message : String(error)));
}

function showMessage(title, text) {
  clear(elements.page).append(h('section', { class: 'card' }, h('h2', {}, title), h('p', {}, text)));
}

async function start() {
  elements.run.addEventListener('change', () => navigate({ run: elements.run.value, host: null, tool: elements.tool.value }));
  elements.host.addEventListener('change', () => navigate({ host: elements.host.value }));
  elements.tool.addEventListener('change', () => navigate({ tool: elements.tool.value }));
  window.addEventListener('popstate', render);
  try {
    const answer = await getJson('/api/runs');
    runs = answer.runs || [];
    elements.root.textContent = answer.root || '';
    elements.root.title = answer.root || '';
  } catch (error) {
    clear(elements.page).append(errorCard(error));
    return;
  }
  render();
}

start();

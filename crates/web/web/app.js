// mlprof's profiler UI: the run, host and tool selectors (as in TensorBoard's
// Profile tab) and the tool page they choose. The state is the query string
// (lib/url_state.js); every navigation renders from it, so links, reloads and
// back/forward all show the same view. The run list is asked for again every
// RUNS_POLL_MS while the page is visible and when the reload button is pressed, so
// runs that training writes appear without a page reload.

import { h, clear } from './lib/dom.js';
import { forgetRun, getFreshJson, getJson } from './lib/api.js';
import { currentParams, goTo, mergeParams } from './lib/url_state.js';
import { mergeRuns } from './lib/runs.js';
import { pollWhileVisible } from './lib/poll.js';
import { loadPage, optionKeys, setToolSpecs, toolLabel, toolSpec, usesToolApi } from './pages/registry.js';
import { optionsBar, optionsProblem, toolOptions } from './components/tool_options.js';
import { hideTooltip } from './charts/common.js';
import { formatBytes, formatNumber } from './lib/format.js';

const ALL_HOSTS = 'all';
/** Every host on the trace viewer's time axis, aligned on their first common step (`all` aligns their clocks). */
const ALL_HOSTS_BY_STEPS = 'all@steps';
const DEFAULT_TOOL = 'overview_page';
/** How often the run list is asked for while the page is visible (the server rescans at most every 5 s). */
const RUNS_POLL_MS = 15_000;
const RELOAD_TITLE = `Look for new runs now (the page also looks every ${RUNS_POLL_MS / 1000} s while it is visible)`;

const elements = {
  run: document.getElementById('run-select'),
  host: document.getElementById('host-select'),
  tool: document.getElementById('tool-select'),
  page: document.getElementById('page'),
  root: document.getElementById('root-path'),
  busy: document.getElementById('busy'),
  notice: document.getElementById('notice'),
  reload: document.getElementById('reload-runs'),
};

let runs = [];
let teardown = null;
let generation = 0;
/** The run, host and tool the page shows (`null` before the first view). */
let shown = null;

/** The run, host and tool the query string asks for, with defaults filled in. */
function resolve(params) {
  const run = runs.find((r) => r.name === params.get('run')) || runs[0];
  const tools = run.tools || [];
  const asked = params.get('tool');
  const tool = tools.includes(asked) ? asked : (tools.includes(DEFAULT_TOOL) ? DEFAULT_TOOL : tools[0]);
  // The trace viewer opens on one host; every host together is asked for by name.
  const fallback = tool === 'trace_viewer' ? run.hosts[0] : ALL_HOSTS;
  const choices = hostChoices(run, tool);
  let host = params.get('host') || fallback;
  if (!choices.includes(host)) host = host === ALL_HOSTS_BY_STEPS && choices.includes(ALL_HOSTS) ? ALL_HOSTS : fallback;
  return { run, host, tool };
}

/**
 * The hosts a tool can show: every host together or one; the trace viewer shows every host
 * on one time axis (aligned by clock or by step) only where there are several.
 */
function hostChoices(run, tool) {
  if (tool !== 'trace_viewer') return [ALL_HOSTS, ...run.hosts];
  return run.hosts.length > 1 ? [ALL_HOSTS, ALL_HOSTS_BY_STEPS, ...run.hosts] : run.hosts;
}

/** A host choice as the selector names it (for the trace viewer, how every host is aligned). */
function hostLabel(run, host, tool) {
  const all = `All hosts (${run.hosts.length})`;
  if (host === ALL_HOSTS) return tool === 'trace_viewer' ? `${all} by clock` : all;
  if (host === ALL_HOSTS_BY_STEPS) return `${all} by step`;
  return host;
}

/**
 * What the page says when the address asked for a run, tool or host it does not show
 * (none there, or not for this run) and what it shows instead; '' when it shows what was asked.
 */
function replacedNotice(params, { run, host, tool }) {
  const said = [];
  const asked = (key) => params.get(key);
  if (asked('run') && asked('run') !== run.name) said.push(`There is no run named ${asked('run')} in the log directory (any more); showing ${run.name}.`);
  if (asked('tool') && asked('tool') !== tool) {
    const known = toolSpec(asked('tool'));
    said.push(known
      ? `${toolLabel(asked('tool'))} has nothing to show for ${run.name}; showing ${toolLabel(tool)}.`
      : `There is no tool named ${asked('tool')}; showing ${toolLabel(tool)}.`);
  }
  const askedHost = asked('host');
  // A run's only host stands for all of them; aligning by step is the trace viewer's.
  const everyHost = askedHost === ALL_HOSTS || askedHost === ALL_HOSTS_BY_STEPS;
  const stoodFor = everyHost && (run.hosts.length === 1 || host === ALL_HOSTS);
  if (askedHost && askedHost !== host && !stoodFor) {
    said.push(`${run.name} has no host named ${askedHost}; showing ${host === ALL_HOSTS ? 'all hosts' : host}.`);
  }
  return said.join(' ');
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

/** Lists the runs, `selected` chosen; a run no longer listed stays shown, marked removed. */
function fillRunSelector(selected) {
  const options = runs.map((r) => option(r.name, r.name, r.name === selected));
  if (!runs.some((r) => r.name === selected)) {
    options.unshift(h('option', { value: selected, selected: true, disabled: true, dataset: { removed: '' } }, `${selected} (removed)`));
  }
  clear(elements.run).append(...options);
}

function fillSelectors({ run, host, tool }) {
  fillRunSelector(run.name);
  clear(elements.host).append(...hostChoices(run, tool).map((name) => option(name, hostLabel(run, name, tool), name === host)));
  clear(elements.tool).append(...run.tools.map((name) => option(name, toolLabel(name), name === tool)));
}

/** Goes to run/host/tool (a new history entry); the page's own state is dropped. */
function navigate(changes) {
  const params = currentParams();
  const next = new URLSearchParams();
  for (const key of ['run', 'host', 'tool', ...optionKeys()]) {
    const value = key in changes ? changes[key] : params.get(key);
    if (value) next.set(key, value);
  }
  if (goTo(next)) render();
}

/** Goes to the current view with analysis options changed (a new history entry; the page's state stays). */
function applyOptions(changes) {
  const next = currentParams();
  for (const [key, value] of Object.entries(changes)) {
    if (value === null || value === undefined || value === '') next.delete(key);
    else next.set(key, value);
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
  showNotice('');
  if (runs.length === 0) {
    shown = null;
    showMessage('No profiles found', 'The directory holds no profile mlprof can read.');
    setBusy(false);
    return;
  }
  await exactTools(params.get('run'));
  if (token !== generation) return;

  const { run, host, tool } = resolve(params);
  showNotice(replacedNotice(params, { run, host, tool }));
  shown = { run: run.name, host, tool };
  const fixed = new URLSearchParams(params);
  fixed.set('run', run.name);
  fixed.set('host', host);
  fixed.set('tool', tool);
  goTo(fixed, { replace: true });
  fillSelectors({ run, host, tool });
  document.title = `${toolLabel(tool)} · ${run.name} · mlprof`;

  const page = elements.page;
  const spec = toolSpec(tool);
  const options = toolOptions(spec, run.format, params);
  let problem = null;
  try {
    problem = await optionsProblem(tool, options);
  } catch (error) {
    problem = error.message;
  }
  if (token !== generation) return;
  const request = { run: run.name, host, tool, ...options };
  const ctx = {
    run: run.name,
    host,
    tool,
    hosts: run.hosts,
    format: run.format,
    /** The analysis options the tool was computed with (`{breakdown}`, `{gap_threshold}`). */
    toolOptions: options,
    /** The query string now (a page's own state included). */
    get params() { return currentParams(); },
    /** Merges a page's view state into the URL (no new history entry). */
    setParams: (changes) => { if (token === generation) mergeParams(changes); },
  };
  const body = h('div', { class: 'page-body' });
  const bar = optionsBar({
    spec,
    format: run.format,
    params,
    apply: applyOptions,
    busy: setBusy,
    problem,
  });
  const header = h('header', { class: 'page-header' },
    h('h1', {}, toolLabel(tool)),
    h('p', { class: 'page-context' }, `${run.name} · ${host === ALL_HOSTS || host === ALL_HOSTS_BY_STEPS ? `all hosts (${run.hosts.join(', ')})` : host}`),
    bar && bar.element);
  clear(page).append(header, body);
  if (problem) {
    body.replaceChildren(errorCard(new Error(problem)));
    setBusy(false);
    return;
  }
  const answered = watchProgress(header, run.name, token);
  try {
    const module = await loadPage(tool);
    const answer = usesToolApi(tool) ? await getJson('/api/tool', request) : null;
    if (token !== generation) return;
    if (bar && answer) bar.showAnswer(answer);
    const cleanup = answer ? await module.render(body, answer, ctx) : await module.mount(body, ctx);
    if (token === generation) teardown = cleanup || null;
    else if (cleanup) cleanup();
  } catch (error) {
    if (token === generation) body.replaceChildren(errorCard(error));
  } finally {
    answered();
    if (token === generation) setBusy(false);
  }
}

/** How often the page asks what the server is reading or building, and after how long it starts (ms). */
const PROGRESS_POLL_MS = 400;
const PROGRESS_AFTER_MS = 500;

/**
 * Shows under the page header what the server is reading or building for run `runName`
 * while the page waits on it (`/api/progress`): from half a second on, until the server is
 * idle for the run and the page has its answer (the trace viewer builds its index after the
 * page is mounted, so the watch outlives the answer while the server still works), or the
 * view changes. Returns the function to call when the page has its answer.
 */
function watchProgress(header, runName, token) {
  const line = h('p', { class: 'load-progress', id: 'load-progress', role: 'status', hidden: true });
  header.append(line);
  let answered = false;
  const poll = async () => {
    if (token !== generation) return;
    let now = { stage: 'idle' };
    try {
      now = await getFreshJson('/api/progress', { run: runName });
    } catch {
      // A failed poll shows nothing; the page's own request reports real errors.
    }
    if (token !== generation) return;
    const text = progressText(now);
    line.textContent = text;
    line.hidden = !text;
    if (text || !answered) setTimeout(poll, PROGRESS_POLL_MS);
  };
  setTimeout(poll, PROGRESS_AFTER_MS);
  return () => { answered = true; };
}

/** One `/api/progress` answer in words; `''` when the server is idle for the run. */
function progressText(now) {
  if (now.stage === 'reading') {
    const percent = now.total_bytes > 0 ? Math.floor((100 * now.done_bytes) / now.total_bytes) : 0;
    return `Reading the profile: ${percent}% (${formatBytes(now.done_bytes)} of ${formatBytes(now.total_bytes)})`;
  }
  if (now.stage === 'indexing') {
    const building = `Building the trace viewer's index of host ${now.host}`;
    if (now.index_stage === 'writing' || !(now.total_events > 0)) return `${building}: ${now.index_stage || 'starting'}…`;
    const percent = Math.floor((100 * now.done_events) / now.total_events);
    return `${building}: ${now.index_stage} ${percent}% (${formatNumber(now.done_events)} of ${formatNumber(now.total_events)} events)`;
  }
  return '';
}

/**
 * Asks for the run list again and updates the page where it changed: new runs join
 * the run selector, removed ones leave it. The view shown stays; when its run was
 * removed the page says so, when its run's files changed it is shown again.
 */
async function refreshRuns() {
  let answer;
  try {
    answer = await getFreshJson('/api/runs');
  } catch (error) {
    elements.reload.title = `Could not ask for the runs: ${error.message}`;
    elements.reload.classList.add('failed');
    return;
  }
  elements.reload.title = RELOAD_TITLE;
  elements.reload.classList.remove('failed');
  const { runs: next, removed, changedFiles, orderChanged } = mergeRuns(runs, answer.runs || []);
  runs = next;
  [...removed, ...changedFiles].forEach(forgetRun);
  if (!orderChanged && changedFiles.length === 0) return;
  if (!shown || changedFiles.includes(shown.run)) {
    render();
    return;
  }
  fillRunSelector(shown.run);
  if (removed.includes(shown.run)) {
    showNotice(`The run ${shown.run} was removed from the log directory: this page shows what was read before it went. Choose another run.`, shown.run);
  } else if (elements.notice.dataset.about === shown.run) {
    showNotice('');
  }
}

/** Shows `text` above the page (a change in the log directory), about run `about`; `''` hides it. */
function showNotice(text, about = null) {
  elements.notice.textContent = text;
  elements.notice.hidden = !text;
  if (about) elements.notice.dataset.about = about;
  else delete elements.notice.dataset.about;
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
  elements.tool.addEventListener('change', () => {
    const tool = elements.tool.value;
    // Other tools' default (every host combined) does not carry over as a choice to see every host's timeline.
    const fromDefault = tool === 'trace_viewer' && currentParams().get('host') === ALL_HOSTS;
    navigate(fromDefault ? { tool, host: null } : { tool });
  });
  window.addEventListener('popstate', render);
  elements.reload.title = RELOAD_TITLE;
  try {
    const [answer, tools] = await Promise.all([getFreshJson('/api/runs'), getJson('/api/tools')]);
    setToolSpecs(tools.tools || []);
    runs = answer.runs || [];
    elements.root.textContent = answer.root || '';
    elements.root.title = answer.root || '';
  } catch (error) {
    clear(elements.page).append(errorCard(error));
    return;
  }
  render();
  const poll = pollWhileVisible(refreshRuns, RUNS_POLL_MS);
  elements.reload.addEventListener('click', async () => {
    elements.reload.setAttribute('aria-busy', 'true');
    try {
      await poll.now();
    } finally {
      elements.reload.setAttribute('aria-busy', 'false');
    }
  });
}

start();

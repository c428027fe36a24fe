// The tools as the server describes them (`/api/tools`: name, label, options,
// outputs), and the pages that draw a tool's answer their own way. A tool without a
// page of its own is drawn by the generic report page, so a tool the server adds
// appears in the selector and works without a change here.

/** The pages that draw a tool's answer their own way, by tool name. */
const PAGES = {
  overview_page: () => import('./overview_page.js'),
  input_pipeline_analyzer: () => import('./input_pipeline.js'),
  framework_op_stats: () => import('./framework_op_stats.js'),
  kernel_stats: () => import('./kernel_stats.js'),
  memory_profile: () => import('./memory_profile.js'),
  pod_viewer: () => import('./pod_viewer.js'),
  tf_data_bottleneck_analysis: () => import('./tf_data.js'),
  gpu: () => import('./gpu.js'),
  transfers: () => import('./transfers.js'),
  python: () => import('./python.js'),
  trace_viewer: () => import('./trace_viewer.js'),
};

const GENERIC = () => import('./generic.js');

/** The tool specs by name (set once from `/api/tools`). */
const specs = new Map();

/** Keeps the server's tool specs (`/api/tools`'s `tools`). */
export function setToolSpecs(tools) {
  specs.clear();
  for (const spec of tools) specs.set(spec.name, spec);
}

/** The spec of `tool` (`{name, label, summary, options, outputs}`), or `null` for a tool the server did not describe. */
export function toolSpec(tool) {
  return specs.get(tool) || null;
}

/** The name the tool selector shows for `tool`. */
export function toolLabel(tool) {
  const spec = toolSpec(tool);
  return spec ? spec.label : tool;
}

/** Loads the page module of `tool`: `{render(root, answer, ctx)}` (or `{mount(root, ctx)}` for a page that reads its own data). */
export function loadPage(tool) {
  return (PAGES[tool] || GENERIC)();
}

/** Whether `tool` draws from `/api/tool` (every tool with a report; not a page that asks for its own data). */
export function usesToolApi(tool) {
  const spec = toolSpec(tool);
  return !spec || spec.outputs.includes('report');
}

/** The query keys of every tool's options; they stay when the run, host or tool changes. */
export function optionKeys() {
  const keys = new Set();
  for (const spec of specs.values()) for (const option of spec.options) keys.add(option.key);
  return [...keys];
}

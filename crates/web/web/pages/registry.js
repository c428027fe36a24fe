// The tool pages by tool name, with the names the selector shows. A tool without
// its own page is rendered by the generic report page.

const PAGES = {
  overview_page: { label: 'Overview', load: () => import('./overview_page.js') },
  input_pipeline_analyzer: { label: 'Input pipeline analyzer', load: () => import('./input_pipeline.js') },
  framework_op_stats: { label: 'Framework op stats', load: () => import('./framework_op_stats.js') },
  kernel_stats: { label: 'Kernel stats', load: () => import('./kernel_stats.js') },
  memory_profile: { label: 'Memory profile', load: () => import('./memory_profile.js') },
  pod_viewer: { label: 'Pod viewer', load: () => import('./pod_viewer.js') },
  tf_data_bottleneck_analysis: { label: 'tf.data bottleneck analysis', load: () => import('./tf_data.js') },
  gpu: { label: 'GPU analyses (HTA)', load: () => import('./gpu.js') },
  transfers: { label: 'Transfers and synchronisation', load: () => import('./transfers.js') },
  trace_viewer: { label: 'Trace viewer', load: () => import('./trace_viewer.js') },
};

const GENERIC = { load: () => import('./generic.js') };

/** The name the tool selector shows for `tool`. */
export function toolLabel(tool) {
  return PAGES[tool] ? PAGES[tool].label : tool;
}

/** Loads the page module of `tool`: `{render(root, answer, ctx)}` (or `{mount(root, ctx)}` for the trace viewer). */
export function loadPage(tool) {
  return (PAGES[tool] || GENERIC).load();
}

/** Whether `tool` draws from `/api/tool` (every tool but the trace viewer, which asks for its own data). */
export function usesToolApi(tool) {
  return tool !== 'trace_viewer';
}

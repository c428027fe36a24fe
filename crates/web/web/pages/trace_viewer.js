// The trace viewer page: the viewer module (web/trace/viewer.js) mounted into the
// page with the run, the host and the URL state it may keep.

/** Mounts the trace viewer into `root`; returns its `unmount`. */
export async function mount(root, ctx) {
  const viewer = await import('../trace/viewer.js');
  const context = { run: ctx.run, host: ctx.host, get params() { return ctx.params; }, setParams: ctx.setParams };
  const handle = viewer.mount(root, context);
  return () => handle && handle.unmount && handle.unmount();
}

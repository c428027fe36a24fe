// The view state lives in the query string (`?run=&host=&tool=&…`), so every view
// is a link. Changing run, host or tool pushes a history entry (back/forward
// return to it); a page's own view state (sort, filter, slider) replaces the
// current entry.

/** The current query parameters. */
export function currentParams() {
  return new URLSearchParams(window.location.search);
}

/** The query string for `params`, keys in a stable order (run, host, tool first). */
export function queryOf(params) {
  const order = ['run', 'host', 'tool'];
  const entries = [...params.entries()].filter(([, v]) => v !== '' && v !== null && v !== undefined);
  entries.sort(([a], [b]) => rank(a, order) - rank(b, order));
  const query = new URLSearchParams(entries).toString();
  return query ? `?${query}` : window.location.pathname;
}

function rank(key, order) {
  const index = order.indexOf(key);
  return index < 0 ? order.length : index;
}

/** Goes to `params` as a new history entry (or replaces the current one). */
export function goTo(params, { replace = false } = {}) {
  const url = queryOf(params);
  if (url === queryOf(currentParams())) return false;
  if (replace) window.history.replaceState(null, '', url);
  else window.history.pushState(null, '', url);
  return true;
}

/**
 * Merges `changes` into the query string of the current entry without a new one;
 * `null`, `undefined` or `''` removes a key.
 */
export function mergeParams(changes) {
  const params = currentParams();
  for (const [key, value] of Object.entries(changes)) {
    if (value === null || value === undefined || value === '') params.delete(key);
    else params.set(key, String(value));
  }
  goTo(params, { replace: true });
}

// The server's JSON API (crates/web/API.md): fetching, errors, and ids wider
// than a double.

/** An answer the server refused, with its `{"error": …}` line. */
export class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.name = 'ApiError';
    this.status = status;
  }
}

/**
 * Keeps integer ids that a double cannot hold exactly (tf.data iterator ids are
 * 64-bit) as their decimal text, so ids compare equal only when they are equal.
 * Other numbers parse as usual.
 */
function keepWideIds(key, value, context) {
  if (typeof value === 'number' && !Number.isSafeInteger(value) && /(^|_)id$/.test(key)) {
    const source = context && context.source;
    if (typeof source === 'string' && /^-?\d+$/.test(source)) return source;
  }
  return value;
}

const answers = new Map();

function urlOf(path, params) {
  const query = new URLSearchParams(Object.entries(params).filter(([, v]) => v !== undefined && v !== null));
  return query.size ? `${path}?${query}` : path;
}

/** GETs `path` (with `params` as its query) and parses the JSON answer; answers are cached. */
export async function getJson(path, params = {}) {
  const url = urlOf(path, params);
  if (!answers.has(url)) {
    const pending = fetchJson(url);
    answers.set(url, pending);
    pending.catch(() => answers.delete(url));
  }
  return answers.get(url);
}

/** Like `getJson`, but always asks the server (for answers that change, such as `/api/runs`). */
export function getFreshJson(path, params = {}) {
  return fetchJson(urlOf(path, params));
}

/** Drops the cached answers about run `run` (its files changed or it is gone). */
export function forgetRun(run) {
  for (const url of answers.keys()) {
    const query = url.indexOf('?');
    if (query >= 0 && new URLSearchParams(url.slice(query + 1)).get('run') === run) answers.delete(url);
  }
}

async function fetchJson(url) {
  const response = await fetch(url, { headers: { Accept: 'application/json' } });
  const text = await response.text();
  let body;
  try {
    body = JSON.parse(text, keepWideIds);
  } catch {
    throw new ApiError(response.status, `${url}: the server answered ${response.status} with no JSON`);
  }
  if (!response.ok) throw new ApiError(response.status, body && body.error ? body.error : `${url}: HTTP ${response.status}`);
  return body;
}

/**
 * The URL of a tool's main table as CSV (`/api/csv`), sorted by `sort`
 * (`column:asc|desc`), computed with the tool's `options` (`{breakdown}`, `{gap_threshold}`).
 */
export function csvUrl({ run, host, tool, sort, options = {} }) {
  const query = new URLSearchParams({ run, host, tool, ...options });
  if (sort) query.set('sort', sort);
  return `/api/csv?${query}`;
}

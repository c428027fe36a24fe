// The trace endpoints of API.md ("Trace viewer") for one run and host. Every
// call returns parsed JSON or throws an Error carrying the server's one-line message;
// aborted calls throw an Error whose name is 'AbortError'.

/** Client of /api/trace/{meta,view,event,search,aggregate} for one run and host. */
export class TraceApi {
  /** `run` and `host` as the page URL names them. */
  constructor(run, host) {
    this.run = run;
    this.host = host;
  }

  /** GET /api/trace/{endpoint}?run&host&…params, parsed; `signal` aborts it. */
  async get(endpoint, params = {}, signal = undefined) {
    const query = new URLSearchParams({ run: this.run, host: this.host });
    for (const [key, value] of Object.entries(params)) {
      if (value !== undefined && value !== null) query.set(key, String(value));
    }
    const response = await fetch(`/api/trace/${endpoint}?${query}`, { signal });
    let body = null;
    try {
      body = await response.json();
    } catch (error) {
      if (error.name === 'AbortError') throw error;
      throw new Error(`/api/trace/${endpoint}: ${response.status} ${response.statusText}, not JSON`);
    }
    if (!response.ok) {
      const message = body && typeof body.error === 'string' ? body.error : `${response.status}`;
      throw new Error(message);
    }
    return body;
  }

  /** Sections, tracks and the trace's time range. */
  meta(signal) {
    return this.get('meta', {}, signal);
  }

  /** Events and merged runs of `tracks` in [startPs, endPs] drawn over widthPx pixels. */
  view({ startPs, endPs, widthPx, tracks }, signal) {
    return this.get(
      'view',
      {
        start_ps: Math.floor(startPs),
        end_ps: Math.ceil(endPs),
        // The server accepts 1–16 384 (API.md).
        width_px: Math.min(16384, Math.max(1, Math.round(widthPx))),
        tracks: tracks.join(','),
      },
      signal,
    );
  }

  /** One event with all its args and flows. */
  event(id, signal) {
    return this.get('event', { id }, signal);
  }

  /** The counter series in [startPs, endPs], at most a point per pixel of `widthPx`. */
  counters({ startPs, endPs, widthPx }, signal) {
    const width = Math.min(16384, Math.max(1, Math.round(widthPx)));
    return this.get('counters', { start_ps: Math.floor(startPs), end_ps: Math.ceil(endPs), width_px: width }, signal);
  }

  /** Totals by name of the events in [startPs, endPs] on `tracks` (at most `limit` rows). */
  aggregate({ startPs, endPs, tracks, limit }, signal) {
    return this.get('aggregate', this.rangeParams({ startPs, endPs, tracks, limit }), signal);
  }

  /** Where the CSV of every row of that range is downloaded from. */
  aggregateCsvUrl({ startPs, endPs, tracks }) {
    const query = new URLSearchParams({ run: this.run, host: this.host });
    for (const [key, value] of Object.entries(this.rangeParams({ startPs, endPs, tracks }))) {
      if (value !== undefined) query.set(key, String(value));
    }
    query.set('format', 'csv');
    return `/api/trace/aggregate?${query}`;
  }

  /** The query parameters of a range. */
  rangeParams({ startPs, endPs, tracks, limit }) {
    return { start_ps: Math.floor(startPs), end_ps: Math.ceil(endPs), tracks: tracks.join(','), limit };
  }

  /**
   * Events whose name contains `q` (case-insensitive), over the whole trace: a page of
   * at most `limit`; `cursor` is `{}` (the first page), `{after_ps[, after_id]}` or
   * `{before_ps[, before_id]}` (API.md).
   */
  search(q, limit, cursor, signal) {
    return this.get('search', { q, limit, ...cursor }, signal);
  }
}

/** True for the error an aborted fetch throws. */
export function isAbort(error) {
  return error !== null && typeof error === 'object' && error.name === 'AbortError';
}

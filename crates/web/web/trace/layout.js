// Vertical layout of the timeline: one header row per section (device, host threads,
// derived lines), then one row per track, each track as tall as its nesting depth.
// Y positions are in content pixels, 0 = just below the time ruler; the viewer maps
// them to the screen by subtracting the scroll offset.

/** Height of the time ruler above the tracks, in CSS pixels. */
export const RULER_HEIGHT = 26;
/** Height of a section header row. */
export const SECTION_HEIGHT = 24;
/** Height of one nesting level of a track. */
export const LEVEL_HEIGHT = 18;
/** Space above and below a track's levels. */
export const TRACK_PADDING = 3;
/** Height of a counter track. */
export const COUNTER_HEIGHT = 38;
/** The section index of the counter tracks (they come first). */
export const COUNTERS = 'counters';
/** The section index of the pinned tracks (after the counters). */
export const PINNED = 'pinned';

/** Width of the label column for a canvas `width` CSS pixels wide. */
export function labelWidth(width) {
  return Math.round(Math.min(240, Math.max(110, width * 0.2)));
}

/**
 * Rows for `sections` (from /api/trace/meta) with the sections whose index is in
 * `collapsed` shown as their header only, after a Counters section of `counters` (the
 * series of /api/trace/counters, `{name, group}`) when there are any, and a Pinned
 * section of the tracks whose ids are in `pinned` (in pinning order; they leave their
 * own section). Tracks whose ids are in `order` come in that order within their section
 * (the others after them, as listed). With a `filter` text, only tracks and counters whose name (or whose
 * section's name) holds it, ignoring case, and the sections that keep some. Returns
 * `{rows, height, byTrack}`, where a row is `{kind: 'section'|'track'|'counter', index,
 * sectionIndex, section, track?, series?, y, height}` and `byTrack` maps a track id to
 * its row (or to its section's header when collapsed).
 */
export function buildLayout(sections, collapsed, counters = [], { pinned = [], filter = '', order = [] } = {}) {
  const rows = [];
  const byTrack = new Map();
  let y = 0;
  const needle = filter.trim().toLowerCase();
  const matches = (...texts) => needle === '' || texts.some((text) => String(text).toLowerCase().includes(needle));
  counters = counters.filter((series) => matches(series.name, series.group, 'Counters'));
  const pinnedSet = new Set(pinned);
  const allTracks = new Map(sections.flatMap((section) => section.tracks.map((track) => [track.id, track])));
  const pinnedSection = { name: 'Pinned', tracks: pinned.map((id) => allTracks.get(id)).filter(Boolean) };
  const rank = new Map(order.map((id, i) => [id, i]));
  const ordered = (tracks) => tracks
    .map((track, i) => [rank.has(track.id) ? rank.get(track.id) : order.length + i, track])
    .sort((a, b) => a[0] - b[0])
    .map(([, track]) => track);
  const shown = [
    ...(pinnedSection.tracks.length ? [[PINNED, pinnedSection]] : []),
    ...sections.map((section, sectionIndex) => [
      sectionIndex,
      { ...section, tracks: ordered(section.tracks).filter((track) => !pinnedSet.has(track.id) && matches(track.name, section.name)) },
    ]),
  ].filter(([index, section]) => index === PINNED || section.tracks.length > 0 || needle === '');
  if (counters.length > 0) {
    const section = { name: 'Counters', tracks: counters };
    rows.push({ kind: 'section', index: rows.length, sectionIndex: COUNTERS, section, y, height: SECTION_HEIGHT });
    y += SECTION_HEIGHT;
    if (!collapsed.has(COUNTERS)) {
      for (const series of counters) {
        rows.push({ kind: 'counter', index: rows.length, sectionIndex: COUNTERS, section, series, y, height: COUNTER_HEIGHT });
        y += COUNTER_HEIGHT;
      }
    }
  }
  shown.forEach(([sectionIndex, section]) => {
    const header = { kind: 'section', index: rows.length, sectionIndex, section, y, height: SECTION_HEIGHT };
    rows.push(header);
    y += SECTION_HEIGHT;
    for (const track of section.tracks) {
      if (collapsed.has(sectionIndex)) {
        byTrack.set(track.id, header);
        continue;
      }
      const height = Math.max(1, track.depth) * LEVEL_HEIGHT + 2 * TRACK_PADDING;
      const row = { kind: 'track', index: rows.length, sectionIndex, section, track, y, height };
      rows.push(row);
      byTrack.set(track.id, row);
      y += height;
    }
  });
  return { rows, height: y, byTrack };
}

/** The row at content position `y`, or null below the last row. */
export function rowAt(layout, y) {
  const rows = layout.rows;
  let low = 0;
  let high = rows.length - 1;
  while (low <= high) {
    const mid = (low + high) >> 1;
    const row = rows[mid];
    if (y < row.y) high = mid - 1;
    else if (y >= row.y + row.height) low = mid + 1;
    else return row;
  }
  return null;
}

/** Rows overlapping content rows [top, bottom). */
export function rowsBetween(layout, top, bottom) {
  return layout.rows.filter((row) => row.y + row.height > top && row.y < bottom);
}

/** Content y of the middle of nesting level `depth` of a track row (a header's middle). */
export function levelCenter(row, depth) {
  if (row.kind !== 'track') return row.y + row.height / 2;
  const level = Math.min(Math.max(0, depth), Math.max(1, row.track.depth) - 1);
  return row.y + TRACK_PADDING + level * LEVEL_HEIGHT + LEVEL_HEIGHT / 2;
}

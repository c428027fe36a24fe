// The generic rendering of a tool's report (mlprof_analysis::report::Report):
// each section a card with its sentences and its table. Every tool page builds on
// it; the main table (the one `mlprof analyze --format csv` writes) keeps its sort
// and filter in the URL and offers Export CSV.

import { h } from '../lib/dom.js';
import { csvUrl } from '../lib/api.js';
import { dataTable, slug } from './data_table.js';
import { notesBlock } from './rich_text.js';

/** A titled card; `id` names it for links and tests. */
export function card(title, children, { id = null, className = '' } = {}) {
  return h('section', { class: `card ${className}`.trim(), id, 'aria-label': title },
    title ? h('h2', {}, title) : null,
    children);
}

/** The sort a `sort=column:asc|desc` parameter names, as `{column, descending}` over `columns`. */
export function parseSort(text, columns) {
  if (!text) return null;
  const [name, direction] = text.split(':');
  const column = columns.findIndex((c) => slug(c) === slug(name));
  return column < 0 ? null : { column, descending: direction !== 'asc' };
}

/** `{column, descending}` as a `sort=` parameter. */
export function sortParam(sort, columns) {
  return sort ? `${slug(columns[sort.column])}:${sort.descending ? 'desc' : 'asc'}` : null;
}

/**
 * The Export CSV link of a tool's main table: the whole table as the server (and
 * `mlprof analyze --format csv`) writes it, in the order the page is sorted by.
 * Like the TF Profiler's Export as CSV, it holds every row, whatever the filter.
 */
export function exportCsvLink(ctx, columns, getSort) {
  const link = h('a', { class: 'button export-csv', download: `${ctx.tool}.csv`, title: 'Download the whole table as CSV, in the current sort order' }, 'Export CSV');
  const refresh = () => { link.href = csvUrl({ run: ctx.run, host: ctx.host, tool: ctx.tool, options: ctx.toolOptions, sort: sortParam(getSort(), columns) }); };
  refresh();
  return { link, refresh };
}

/**
 * A table whose sort and filter live in the URL (`sort=`, `filter=`) and that
 * offers Export CSV; for the tool's main table.
 * Extra options go to `dataTable` (e.g. `keep`, `toolbar`).
 */
export function mainTable(ctx, { columns, rows, caption, toolbar = [], ...options }) {
  let table = null;
  const exporter = exportCsvLink(ctx, columns, () => table && table.sortSpec());
  table = dataTable({
    columns, rows, caption, id: 'main-table',
    sort: parseSort(ctx.params.get('sort'), columns),
    filter: ctx.params.get('filter') || '',
    toolbar: [...toolbar, exporter.link],
    onChange: ({ sort, filter }) => {
      ctx.setParams({ sort: sortParam(sort, columns), filter });
      exporter.refresh();
    },
    ...options,
  });
  exporter.refresh();
  return table;
}

/** A report section as a card: sentences, then its table (the main one with URL state and Export CSV). */
export function sectionCard(section, ctx, { before = null, after = null } = {}) {
  const table = section.table
    ? (section.main
      ? mainTable(ctx, { columns: section.table.columns, rows: section.table.rows, caption: section.title, lead: section.table.key_columns })
      : dataTable({ columns: section.table.columns, rows: section.table.rows, caption: section.title, pageSize: 25, lead: section.table.key_columns }))
    : null;
  return card(section.title, [before, notesBlock(section.notes), after, table && table.element], {
    id: `section-${slug(section.title)}`,
    className: section.main ? 'main-section' : '',
  });
}

/** The sections whose title starts with `prefix`. */
export function sectionsStarting(report, prefix) {
  return report.sections.filter((section) => section.title.startsWith(prefix));
}

/**
 * Renders every section of `report` not in `used` (a Set of sections the page has
 * already shown), in report order.
 */
export function remainingSections(report, ctx, used = new Set()) {
  return report.sections.filter((section) => !used.has(section)).map((section) => sectionCard(section, ctx));
}

/**
 * Every section of `report` in order, with a chart above the table of the
 * sections named in `charts` (`[[titlePrefix, () => node]]`).
 */
export function sectionsWithCharts(report, ctx, charts) {
  return report.sections.map((section) => {
    const entry = charts.find(([prefix]) => section.title.startsWith(prefix));
    return sectionCard(section, ctx, { before: entry ? entry[1]() : null });
  });
}

/**
 * Picks sections out of `report` by title prefix and remembers which were taken,
 * so `remainingSections(report, ctx, picker.used)` shows only the others.
 */
export function sectionPicker(report) {
  const used = new Set();
  return {
    used,
    take(prefix) {
      const [section] = sectionsStarting(report, prefix);
      if (section) used.add(section);
      return section;
    },
  };
}

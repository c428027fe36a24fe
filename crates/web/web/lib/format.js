// Numbers for people, and the report's table cells (strings, numbers rounded as the
// CLI shows them, or `null`) read as values and as text.

const grouped = new Map();

/** `value` with `decimals` decimals and thousands separators (`1,234.5`). */
export function formatNumber(value, decimals = 0) {
  if (!Number.isFinite(value)) return String(value);
  let formatter = grouped.get(decimals);
  if (!formatter) {
    formatter = new Intl.NumberFormat('en-US', { minimumFractionDigits: decimals, maximumFractionDigits: decimals });
    grouped.set(decimals, formatter);
  }
  return formatter.format(value);
}

/** Whether a report cell holds a number (cells are strings, numbers, or `null` for a value that is not finite). */
export function cellIsNumber(cell) {
  return typeof cell === 'number';
}

/** The value of a report cell: its number, or its text (`''` for `null`). */
export function cellValue(cell) {
  return cell ?? '';
}

/** The decimals in the shortest text of `value` (`67.722` → 3), at most 6. */
function decimalsOf(value) {
  if (Number.isInteger(value)) return 0;
  const text = String(Math.abs(value));
  const exponent = text.indexOf('e-');
  if (exponent >= 0) return 6;
  const point = text.indexOf('.');
  return point < 0 ? 0 : Math.min(6, text.length - point - 1);
}

/**
 * The decimals to show in one column. The server rounds numbers to the decimals the
 * CLI shows, so a column shows the most decimals any of its numbers has.
 */
export function columnDecimals(cells) {
  let decimals = 0;
  for (const cell of cells) if (cellIsNumber(cell)) decimals = Math.max(decimals, decimalsOf(cell));
  return decimals;
}

const TIME_UNITS = [
  ['s', 1e12],
  ['ms', 1e9],
  ['µs', 1e6],
  ['ns', 1e3],
];

/** A duration in picoseconds in the largest unit that keeps it ≥ 1 (`12.3 ms`). */
export function formatPs(ps, digits = 3) {
  const magnitude = Math.abs(ps);
  for (const [unit, scale] of TIME_UNITS) {
    if (magnitude >= scale) return `${trim(ps / scale, digits)} ${unit}`;
  }
  return `${formatNumber(ps)} ps`;
}

/** Milliseconds as `64.71 ms` (or µs below 1 ms). */
export function formatMs(ms) {
  return formatPs(ms * 1e9);
}

/** Microseconds as a duration text. */
export function formatUs(us) {
  return formatPs(us * 1e6);
}

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];

/** Bytes in binary units (`4.60 MiB`). */
export function formatBytes(bytes) {
  let value = Number(bytes);
  let unit = 0;
  while (Math.abs(value) >= 1024 && unit < BYTE_UNITS.length - 1) {
    value /= 1024;
    unit += 1;
  }
  return unit === 0 ? `${formatNumber(value)} B` : `${formatNumber(value, 2)} ${BYTE_UNITS[unit]}`;
}

/** A percentage (`91.3%`). */
export function formatPercent(percent, decimals = 1) {
  return `${formatNumber(percent, decimals)}%`;
}

/** `value` with about `digits` significant digits, at most 3 decimals. */
function trim(value, digits) {
  const magnitude = Math.abs(value);
  const decimals = magnitude >= 100 ? 1 : magnitude >= 10 ? 2 : 3;
  return formatNumber(value, Math.min(decimals, digits));
}

/** What a person reads in a cell: numbers with `decimals` decimals, `null` as a dash, text as is. */
export function cellText(cell, decimals = 0) {
  if (cellIsNumber(cell)) return formatNumber(cell, decimals);
  if (cell === null || cell === undefined) return '—';
  return String(cell);
}

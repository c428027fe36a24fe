// Numbers for people, and the report's table cells (strings, numbers, or
// `{value, decimals}` objects) read as values and as text.

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

/** The value of a report cell: a number, or its text. */
export function cellValue(cell) {
  if (cell !== null && typeof cell === 'object') return Number(cell.value);
  return cell ?? '';
}

/** Whether a report cell holds a number. */
export function cellIsNumber(cell) {
  return typeof cell === 'number' || (cell !== null && typeof cell === 'object' && 'value' in cell);
}

/** The decimals a cell asks for, or `undefined` when it does not say. */
export function cellDecimals(cell) {
  if (cell !== null && typeof cell === 'object' && Number.isInteger(cell.decimals)) return cell.decimals;
  return undefined;
}

/**
 * The decimals to show in one column: what its cells ask for, else 0 when every
 * number is whole, 2 for percentages and ratios, 3 otherwise (µs → ns, ms → µs).
 */
export function columnDecimals(header, cells) {
  let asked;
  let whole = true;
  for (const cell of cells) {
    if (!cellIsNumber(cell)) continue;
    const decimals = cellDecimals(cell);
    if (decimals !== undefined) asked = Math.max(asked ?? 0, decimals);
    // An object cell is a real number (the report's `Num`) even when its value is whole.
    if (typeof cell === 'object' || !Number.isInteger(cell)) whole = false;
  }
  if (asked !== undefined) return asked;
  if (whole) return 0;
  return /%|ratio|share/i.test(header) ? 2 : 3;
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

/** What a person reads in a cell: numbers with `decimals` decimals, text as is. */
export function cellText(cell, decimals = 0) {
  if (cellIsNumber(cell)) {
    return formatNumber(cellValue(cell), cellDecimals(cell) ?? decimals);
  }
  return String(cell ?? '');
}

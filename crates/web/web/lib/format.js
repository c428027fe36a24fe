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

// Durations, sizes, rates, counts and percentages follow mlprof's one rule for numbers
// (crates/model/src/human.rs, which the terminal uses): the largest unit that keeps the
// value at least 1, three significant digits, no trailing zeros, thousands grouped,
// never "-0". Both are checked against crates/model/src/human_cases.json.

/** What a value that is not a finite number reads as. */
export const MISSING = '—';

const DURATION_UNITS = [
  ['s', 1e12],
  ['ms', 1e9],
  ['µs', 1e6],
  ['ns', 1e3],
  ['ps', 1],
];

/** A duration in picoseconds: `12.3 ms`, `789 ns`, `0`. */
export function formatDuration(ps) {
  if (!Number.isFinite(ps)) return MISSING;
  const magnitude = Math.abs(ps);
  if (magnitude < 0.5) return '0';
  let index = DURATION_UNITS.findIndex(([, size]) => magnitude >= size);
  if (index < 0) index = DURATION_UNITS.length - 1;
  // A value that rounds to 1000 of its unit is 1 of the next larger one.
  if (index > 0 && roundSignificant(magnitude / DURATION_UNITS[index][1]) >= 1000) index -= 1;
  const [unit, size] = DURATION_UNITS[index];
  return `${significant(ps / size)} ${unit}`;
}

/** Milliseconds as a duration text (`64.7 ms`). */
export function formatMs(ms) {
  return formatDuration(ms * 1e9);
}

/** Microseconds as a duration text. */
export function formatUs(us) {
  return formatDuration(us * 1e6);
}

const BYTE_UNITS = ['B', 'KiB', 'MiB', 'GiB', 'TiB', 'PiB'];
const SI_PREFIXES = ['', 'k', 'M', 'G', 'T', 'P'];

/** Bytes in binary units (`4.6 MiB`). */
export function formatBytes(bytes) {
  return scaled(Number(bytes), 1024, BYTE_UNITS, '');
}

/** A rate of `perSecond` `unit`s a second with an SI prefix (`33 GB/s`, `1.24 TFLOP/s`). */
export function formatRate(perSecond, unit) {
  return `${scaled(perSecond, 1000, SI_PREFIXES, unit)}/s`;
}

/** A count or an average of counts: `8`, `7.5`, `1,234,567`. */
export function formatCount(value) {
  if (!Number.isFinite(value)) return MISSING;
  const rounded = Math.round(value * 10) / 10;
  return unsignedZero(group(Number.isInteger(rounded) ? rounded.toFixed(0) : rounded.toFixed(1)));
}

/** A percentage (`91.3%`), one decimal unless told otherwise. */
export function formatPercent(percent, decimals = 1) {
  if (!Number.isFinite(percent)) return MISSING;
  return `${unsignedZero(group(percent.toFixed(decimals)))}%`;
}

/** `value` in the largest of `prefixes` (each `step` times the one before) that keeps it under 1000 when shown. */
function scaled(value, step, prefixes, unit) {
  if (!Number.isFinite(value)) return MISSING;
  let shown = value;
  let index = 0;
  while (index + 1 < prefixes.length && roundSignificant(Math.abs(shown)) >= 1000) {
    shown /= step;
    index += 1;
  }
  return `${significant(shown)} ${prefixes[index]}${unit}`;
}

/** The decimals that give three significant digits: two below 10, one below 100, none from 100. */
function decimalsFor(value) {
  const magnitude = Math.abs(value);
  return magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : 2;
}

/** `value` rounded as `significant` shows it, as a number. */
function roundSignificant(value) {
  const factor = 10 ** decimalsFor(value);
  return Math.round(value * factor) / factor;
}

/** `value` with three significant digits, trailing zeros removed, thousands grouped (`12.3`, `1,234`). */
function significant(value) {
  let text = value.toFixed(decimalsFor(value));
  if (text.includes('.')) text = text.replace(/\.?0+$/, '');
  return unsignedZero(group(text));
}

/** A decimal number's text with commas between groups of three integer digits. */
function group(text) {
  const sign = text.startsWith('-') ? '-' : '';
  const [integer, fraction] = text.slice(sign.length).split('.');
  const grouped = integer.replace(/\B(?=(\d{3})+(?!\d))/g, ',');
  return `${sign}${grouped}${fraction === undefined ? '' : `.${fraction}`}`;
}

/** The text without the sign of a value that rounded to zero (`-0` → `0`). */
function unsignedZero(text) {
  return /^-[0.]+$/.test(text) ? text.slice(1) : text;
}

/** What a person reads in a cell: numbers with `decimals` decimals, `null` as a dash, text as is. */
export function cellText(cell, decimals = 0) {
  if (cellIsNumber(cell)) return formatNumber(cell, decimals);
  if (cell === null || cell === undefined) return '—';
  return String(cell);
}

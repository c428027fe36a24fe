// Points in time and the ruler's tick placement for the trace viewer (durations are
// written by lib/format.js, mlprof's one rule for numbers).
// Every time here is a Number of picoseconds relative to the profile start, as the
// API sends them; units are chosen for reading (ns/µs/ms/s), never stored.

/** Units from largest to smallest, with their size in picoseconds. */
const UNITS = [
  ['s', 1e12],
  ['ms', 1e9],
  ['µs', 1e6],
  ['ns', 1e3],
  ['ps', 1],
];

/** The largest unit not larger than `ps` (ps for anything below 1 ns). */
function unitFor(ps) {
  const magnitude = Math.abs(ps);
  for (const unit of UNITS) {
    if (magnitude >= unit[1]) return unit;
  }
  return UNITS[UNITS.length - 1];
}

/** Trims trailing zeros of a fixed-point string ("1.500" → "1.5", "2.000" → "2"). */
function trimZeros(text) {
  return text.includes('.') ? text.replace(/\.?0+$/, '') : text;
}

/**
 * A point in time with enough decimals that two times `resolutionPs` apart read
 * differently: "1.234567 s". Used for event starts and the ruler's base.
 */
export function formatTime(ps, resolutionPs = 1) {
  if (!Number.isFinite(ps)) return '—';
  const [name, size] = unitFor(ps === 0 ? resolutionPs : ps);
  const decimals = Math.min(12, Math.max(0, Math.ceil(Math.log10(size / Math.max(1, resolutionPs)))));
  return `${trimZeros((ps / size).toFixed(decimals))} ${name}`;
}

/** The smallest 1·10^k, 2·10^k or 5·10^k picoseconds that is at least `ps` (and ≥ 1). */
export function niceStep(ps) {
  if (!(ps > 1)) return 1;
  const power = 10 ** Math.floor(Math.log10(ps));
  for (const factor of [1, 2, 5, 10]) {
    if (factor * power >= ps) return factor * power;
  }
  return 10 * power;
}

/**
 * Ticks for a ruler showing [startPs, endPs] over widthPx pixels, about `spacingPx`
 * apart. Returns `{stepPs, basePs, ticks: [{ps, label}]}`. Labels are absolute
 * ("12.4 ms") while they stay short; deep inside a long trace they become offsets from
 * `basePs` ("+50 ns"), and the caller shows `basePs` once (basePs is null otherwise).
 */
export function rulerTicks(startPs, endPs, widthPx, spacingPx = 110) {
  const span = Math.max(1, endPs - startPs);
  const stepPs = niceStep((span / Math.max(1, widthPx)) * spacingPx);
  const first = Math.ceil(startPs / stepPs) * stepPs;
  const relative = Math.max(Math.abs(startPs), Math.abs(endPs)) / stepPs > 5000;
  const basePs = relative ? Math.floor(startPs / (stepPs * 10)) * stepPs * 10 : null;
  const largest = relative ? endPs - basePs : Math.max(Math.abs(startPs), Math.abs(endPs));
  const [unit, size] = tickUnit(largest, stepPs);
  const decimals = Math.max(0, Math.ceil(Math.log10(size / stepPs) - 1e-9));
  const ticks = [];
  for (let ps = first; ps <= endPs && ticks.length < 1000; ps += stepPs) {
    const value = relative ? ps - basePs : ps;
    const label = `${relative ? '+' : ''}${trimZeros((value / size).toFixed(decimals))} ${unit}`;
    ticks.push({ ps, label });
  }
  return { stepPs, basePs, ticks };
}

/**
 * The unit for tick labels up to `largestPs` apart by `stepPs`: the unit of the largest
 * label, or a smaller one where that would need more than three decimals
 * (0–400 ms by 50 ms: "350 ms"; 63.6–64 ms by 50 µs: "63.65 ms").
 */
function tickUnit(largestPs, stepPs) {
  let index = UNITS.indexOf(unitFor(Math.max(largestPs, stepPs)));
  while (index < UNITS.length - 1 && UNITS[index][1] / stepPs > 1000) index++;
  return UNITS[index];
}

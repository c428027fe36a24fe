// A benchmark, not a test (scripts/bench_first_paint runs it): how long the trace
// viewer takes to draw its first frame of a trace, in headless Chromium, against a
// `mlprof serve` that has not indexed the trace yet (cold) and then again with its
// index cached (warm). Prints one line per load: seconds from navigation to the first
// drawn frame (`.tv[data-ready="1"]` with `data-frames` ≥ 1).
//
//   node first_paint.mjs BASE_URL [LOADS]

import { mkdtemp, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { chromium } from 'playwright-core';

const [base, loadsArg] = process.argv.slice(2);
if (!base) {
  console.error('usage: node first_paint.mjs BASE_URL [LOADS]');
  process.exit(2);
}
const loads = Number(loadsArg || 2);
const profile = await mkdtemp(join(tmpdir(), 'mlprof-first-paint-'));
const context = await chromium.launchPersistentContext(profile, {
  executablePath: '/usr/bin/chromium',
  headless: true,
  viewport: { width: 1920, height: 1080 },
  args: ['--no-sandbox'],
});
try {
  const runs = await (await fetch(new URL('/api/runs', base))).json();
  const run = runs.runs.find((candidate) => candidate.hosts.length > 0);
  const query = `run=${encodeURIComponent(run.name)}&host=${encodeURIComponent(run.hosts[0])}&tool=trace_viewer`;
  const page = context.pages()[0] || (await context.newPage());
  for (let load = 0; load < loads; load += 1) {
    const started = performance.now();
    await page.goto(new URL(`?${query}`, base).href);
    await page.waitForSelector('.tv[data-ready="1"]', { timeout: 600_000 });
    await page.waitForFunction(() => Number(document.querySelector('.tv').dataset.frames || 0) > 0, null, {
      timeout: 600_000,
    });
    const seconds = (performance.now() - started) / 1000;
    console.log(`${load === 0 ? 'cold' : 'warm'} load ${load + 1}: first frame after ${seconds.toFixed(3)} s`);
  }
} finally {
  await context.close();
  await rm(profile, { recursive: true, force: true });
}

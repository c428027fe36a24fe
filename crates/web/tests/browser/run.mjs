// Runs the UI specs (specs/*.mjs) in Debian's Chromium against a running
// `mlprof serve`:
//
//   node run.mjs BASE_URL [--label NAME] [SPEC…]
//
// Each spec module exports `default async function (t)` and gets a fresh page:
//   t.browser        the Playwright BrowserContext (t.browser.newPage() opens another watched page)
//   t.page           a fresh page (viewport 1400×900)
//   t.baseUrl        BASE_URL (ends with `/`)
//   t.api(path)      GETs BASE_URL + path and parses the JSON answer (fails on an HTTP error)
//   t.screenshot(n)  saves the page to target/ui-screenshots/[LABEL-]n.png under the repository root
//   t.assert         node:assert/strict
//   t.skip(reason)   ends the spec as skipped (e.g. a tool the fixture does not have)
// Every page of every spec fails the spec on a console error, an uncaught page error,
// or a request to any origin but the server's (such requests are aborted). SPEC names
// (file names without `.mjs`) pick specs; the default is all of them. Prints one line
// per spec and a count of passed, failed and skipped specs; exits 1 when a spec failed
// or none ran.

import assert from 'node:assert/strict';
import { mkdir, mkdtemp, readdir, rm } from 'node:fs/promises';
import { tmpdir } from 'node:os';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath, pathToFileURL } from 'node:url';
import { chromium } from 'playwright-core';

const HERE = dirname(fileURLToPath(import.meta.url));
const REPO = resolve(HERE, '../../../..');
const SCREENSHOTS = join(REPO, 'target', 'ui-screenshots');
const SPEC_TIMEOUT_MS = 180_000;
const CHROMIUM_ARGS = [
  '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking',
  '--disable-component-update', '--disable-sync',
];

class Skip extends Error {}

function parseArgs(argv) {
  const options = { baseUrl: null, label: '', specs: [] };
  for (let i = 0; i < argv.length; i += 1) {
    if (argv[i] === '--label') options.label = argv[++i] || '';
    else if (!options.baseUrl) options.baseUrl = argv[i];
    else options.specs.push(argv[i]);
  }
  if (!options.baseUrl) throw new Error('usage: node run.mjs BASE_URL [--label NAME] [SPEC…]');
  const url = new URL(options.baseUrl);
  url.pathname = url.pathname.endsWith('/') ? url.pathname : `${url.pathname}/`;
  options.baseUrl = url.href;
  return options;
}

/** Records what must not happen on `page`: console errors, page errors. */
function watch(page, problems) {
  page.on('console', (message) => {
    if (message.type() === 'error') problems.push(`console error on ${page.url()}: ${message.text()}`);
  });
  page.on('pageerror', (error) => problems.push(`page error on ${page.url()}: ${error.message}`));
}

async function specFiles(wanted) {
  const names = (await readdir(join(HERE, 'specs'))).filter((name) => name.endsWith('.mjs')).sort();
  const picked = wanted.length ? names.filter((name) => wanted.includes(name.replace(/\.mjs$/, ''))) : names;
  const missing = wanted.filter((name) => !names.includes(`${name}.mjs`));
  if (missing.length) throw new Error(`no such spec: ${missing.join(', ')}`);
  return picked;
}

function withTimeout(promise, ms, what) {
  let timer;
  const timeout = new Promise((_, reject) => { timer = setTimeout(() => reject(new Error(`${what} took longer than ${ms / 1000} s`)), ms); });
  return Promise.race([promise, timeout]).finally(() => clearTimeout(timer));
}

async function main() {
  const options = parseArgs(process.argv.slice(2));
  const origin = new URL(options.baseUrl).origin;
  const files = await specFiles(options.specs);
  await mkdir(SCREENSHOTS, { recursive: true });
  const profile = await mkdtemp(join(tmpdir(), 'mlprof-ui-chromium-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: '/usr/bin/chromium',
    headless: true,
    args: CHROMIUM_ARGS,
    acceptDownloads: true,
    viewport: { width: 1400, height: 900 },
  });
  let problems = [];
  context.on('page', (page) => watch(page, problems));
  for (const page of context.pages()) watch(page, problems);
  await context.route('**/*', (route) => {
    const url = route.request().url();
    if (new URL(url).origin === origin) return route.continue();
    problems.push(`request to another origin: ${url}`);
    return route.abort('blockedbyclient');
  });

  const counts = { passed: 0, failed: 0, skipped: 0 };
  for (const file of files) {
    const name = file.replace(/\.mjs$/, '');
    problems = [];
    const page = await context.newPage();
    const started = Date.now();
    const t = {
      browser: context,
      page,
      baseUrl: options.baseUrl,
      assert,
      api: async (path) => {
        const response = await fetch(new URL(path, options.baseUrl));
        const body = await response.json();
        if (!response.ok) throw new Error(`GET ${path}: ${response.status} ${body && body.error}`);
        return body;
      },
      screenshot: async (shot) => {
        const file = join(SCREENSHOTS, `${options.label ? `${options.label}-` : ''}${shot}.png`);
        // From the top, so the sticky app bar and sidebar are drawn where they belong.
        await page.evaluate(() => window.scrollTo(0, 0));
        await page.screenshot({ path: file, fullPage: true });
        return file;
      },
      skip: (reason) => { throw new Skip(reason); },
    };
    let outcome;
    try {
      const spec = await import(pathToFileURL(join(HERE, 'specs', file)).href);
      await withTimeout(spec.default(t), SPEC_TIMEOUT_MS, name);
      outcome = problems.length ? `FAIL ${name}\n    ${problems.join('\n    ')}` : `ok   ${name}`;
    } catch (error) {
      if (error instanceof Skip) {
        outcome = problems.length ? `FAIL ${name}\n    ${problems.join('\n    ')}` : `skip ${name}: ${error.message}`;
      } else {
        outcome = `FAIL ${name}\n    ${String(error && error.stack ? error.stack : error).split('\n').join('\n    ')}${problems.length ? `\n    ${problems.join('\n    ')}` : ''}`;
      }
    }
    for (const open of context.pages()) await open.close().catch(() => {});
    const kind = outcome.startsWith('ok') ? 'passed' : outcome.startsWith('skip') ? 'skipped' : 'failed';
    counts[kind] += 1;
    console.log(`${outcome}${kind === 'failed' ? '' : ` (${Date.now() - started} ms)`}`);
  }
  await context.close();
  await rm(profile, { recursive: true, force: true });
  const ran = counts.passed + counts.failed;
  console.log(`ui specs (${options.label || options.baseUrl}): ${counts.passed} passed, ${counts.failed} failed, ${counts.skipped} skipped`);
  process.exitCode = counts.failed > 0 || ran === 0 ? 1 : 0;
}

main().catch((error) => {
  console.error(error && error.stack ? error.stack : String(error));
  process.exitCode = 1;
});

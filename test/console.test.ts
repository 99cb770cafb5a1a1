/**
 * The console in a real browser (Debian's Chromium, driven by playwright-core) against a real
 * `berth up`: a wrong token sees nothing, a login sees the nodes with the shares the HTTP API
 * gives and the placement what-if `berth placement simulate` gives, the tables with their segments
 * by day, the pools with the API's admission, preflight, node-hours and `berth cost`'s bill, a
 * heavy query's pool launch and park, the editor runs a query (rows, a chart, CSV, cancel), and the
 * Queries view lists it with the API's count and details. A screenshot of each view goes to a
 * directory this run makes.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { CostReport } from '../cli/commands/cost.js';
import type { Endpoints } from '../cli/embedded/cluster.js';
import type { SimulationResult } from '../core/placement-simulation.js';
import { HEAVY_SQL } from '../cli/demo.js';
import { ControllerClient } from '../services/controller/client.js';
import { CoordinatorClient } from '../services/coordinator/client.js';
import { berth, FREE_PORTS, startBerth } from './helpers/berth-cli.js';
import { eventNdjson } from './helpers/event-data.js';

const CHROMIUM = '/usr/bin/chromium';
/** Without the background-networking flags Chromium's own connections are refused here, and it stalls. */
const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];
const HOURLY =
  "SELECT date_trunc('hour', ts) AS hour, count(*) AS n, avg(latency_ms) AS latency FROM events GROUP BY 1 ORDER BY 1";
/** Long enough to be cancelled mid-way: 10¹⁰ rows of a ten-row table, light by its few bytes. */
const SLOW = `SELECT count(*) AS n FROM ${'abcdefghij'
  .split('')
  .map((t) => `digits ${t}`)
  .join(', ')} WHERE a.d + b.d + c.d + d.d + e.d + f.d + g.d + h.d + i.d + j.d > 100`;
/**
 * Verdicts here: a query whose state does not decompose over more than 32 KiB is heavy (memory),
 * so the demo's monthly window over the 70 KiB of events launches the memory class, while the
 * editor's cross join of `digits` (a few KiB) stays light.
 */
const MEMORY_BYTES = String(32 * 1024);
/** The pool parks this long after its last query, so the test sees it go back to zero. */
const HEAVY_IDLE_MS = '10000';
/** One row every 30 s over 50 hours, in six segments of 1,000 rows: three start on each of two days. */
const EVENTS = 6_000;

describe('the console in a browser', () => {
  let dir: string;
  let shots: string;
  let up: ReturnType<typeof startBerth>;
  let endpoints: Endpoints;
  let token: string;
  let dataDir: string;
  let api: CoordinatorClient;
  let browser: BrowserContext;
  let page: Page;
  /** The page's own errors: a script failing, or anything the Content-Security-Policy refused. */
  const problems: string[] = [];

  const shoot = (name: string) => page.screenshot({ path: path.join(shots, `${name}.png`) });
  /** What the console's API answers this page, with its cookies (none, or the session). */
  const status = (url: string) => page.evaluate(`fetch(${JSON.stringify(url)}).then((r) => r.status)`);

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-console-'));
    shots = process.env.BERTH_CONSOLE_SCREENSHOTS ?? (await mkdtemp(path.join(os.tmpdir(), 'berth-console-shots-')));
    console.log(`console screenshots: ${shots}`);
    dataDir = path.join(dir, 'data');
    process.env.BERTH_HEAVY_MEMORY_BYTES = MEMORY_BYTES; // berth up's services inherit it
    up = startBerth(
      'up',
      '--data-dir',
      dataDir,
      '--vcpus',
      '4,4,2',
      '--cache-mb',
      '64',
      '--heavy-idle-ms',
      HEAVY_IDLE_MS,
      ...FREE_PORTS,
    );
    const [, launched] = await Promise.all([
      up.waitFor(/Ctrl-C stops everything/),
      chromium.launchPersistentContext(path.join(dir, 'chromium'), {
        executablePath: CHROMIUM,
        args: CHROMIUM_ARGS,
        viewport: { width: 1280, height: 800 },
        acceptDownloads: true,
      }),
    ]);
    browser = launched;
    page = await browser.newPage();
    page.on('console', (message) => {
      if (message.type() === 'error') problems.push(message.text());
    });
    page.on('pageerror', (error) => problems.push(error.message));
    endpoints = JSON.parse(await readFile(path.join(dataDir, 'endpoints.json'), 'utf8')) as Endpoints;
    token = (await readFile(path.join(dataDir, 'token'), 'utf8')).trim();
    api = new CoordinatorClient(endpoints.coordinator, token);
    const rows = path.join(dir, 'events.ndjson');
    await writeFile(rows, await eventNdjson(0, EVENTS));
    const ingested = await berth('ingest', rows, '--table', 'events', '--batch-rows', '1000', '--data-dir', dataDir);
    expect(ingested.stdout, ingested.stderr).toContain('as 6 segment(s)');
    const digits = path.join(dir, 'digits.ndjson');
    await writeFile(digits, Array.from({ length: 10 }, (_, d) => `${JSON.stringify({ d })}\n`).join(''));
    const dimension = await berth('ingest', digits, '--table', 'digits', '--no-timestamp', '--data-dir', dataDir);
    expect(dimension.code, dimension.stderr).toBe(0);
  }, 180_000);

  afterAll(async () => {
    await browser?.close();
    up?.child.kill('SIGINT');
    await up?.exited;
    await rm(dir, { recursive: true, force: true });
  });

  it('is at the URL endpoints.json records, printed beside the Temporal Web UI', () => {
    expect(endpoints.console).toBe(`${endpoints.coordinator}/console/`);
    expect(up.output()).toContain(`the console is at ${endpoints.console}`);
    expect(up.output()).toContain(`the Temporal Web UI at ${endpoints.temporalUi}`);
  });

  it('shows nothing but the login page to a wrong token, and its API answers 401', async () => {
    await page.goto(endpoints.console);
    await expect(page.getByRole('heading', { name: 'Berth console' }).isVisible()).resolves.toBe(true);
    await page.getByLabel('Cluster token').fill(`${token}x`);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByRole('alert').waitFor();
    expect(await page.getByRole('alert').textContent()).toContain('not the cluster’s token');
    expect(await page.locator('nav').count()).toBe(0);
    const text = (await page.textContent('body')) ?? '';
    for (const node of endpoints.nodes) expect(text).not.toContain(node.id);
    expect(await browser.cookies()).toEqual([]);
    for (const call of ['/console/api/nodes', '/console/api/queries', '/console/api/pools', '/console/app.js'])
      expect(await status(call), call).toBe(401);
    // The API's bearer token is not a session either: the console's API wants the cookie.
    const bearer = await fetch(`${endpoints.coordinator}/console/api/nodes`, {
      headers: { authorization: `Bearer ${token}` },
    });
    expect(bearer.status).toBe(401);
  });

  it('logs in with the token into an HttpOnly, SameSite=Strict session, and shows the API’s shares and a what-if', async () => {
    await page.goto(endpoints.console);
    await page.getByLabel('Cluster token').fill(token);
    await page.getByRole('button', { name: 'Log in' }).click();
    await page.getByTestId('nodes').waitFor();
    const [cookie, ...others] = await browser.cookies();
    expect(others).toEqual([]);
    expect(cookie).toMatchObject({ name: 'berth_console', httpOnly: true, sameSite: 'Strict', path: '/console' });
    expect(cookie!.value).not.toContain(token);
    expect(page.url()).not.toContain(token);
    expect(await page.evaluate('document.cookie')).toBe('');
    expect(await page.evaluate('JSON.stringify(localStorage) + JSON.stringify(sessionStorage)')).toBe('{}{}');

    // The page and the HTTP API at the same moment: the same nodes, the same shares.
    const [ids, shares, weights, nodes] = await Promise.all([
      page.getByTestId('node-id').allTextContents(),
      page.getByTestId('node-share').allTextContents(),
      page.getByTestId('node-weight').allTextContents(),
      api.nodes(),
    ]);
    expect(ids).toHaveLength(3);
    expect(ids).toEqual(nodes.map((n) => n.id));
    expect(shares).toEqual(nodes.map((n) => `${(n.share * 100).toFixed(1)}%`));
    expect(weights).toEqual(nodes.map((n) => String(n.weight)));
    expect([...shares].sort()).toEqual(['20.0%', '40.0%', '40.0%']);
    expect(await page.getByTestId('nodes-page').textContent()).toBe(`nodes 1–3 of ${nodes.length}, page 1 of 1`);
    expect(await page.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true);
    // The one meta replica `berth up` runs, as the coordinator calls it, ready.
    expect(await page.getByTestId('meta-url').allTextContents()).toEqual([endpoints.meta]);
    expect(await page.getByTestId('meta-ready').allTextContents()).toEqual(['ready']);
    await shoot('cluster');

    // The what-if answers as `berth placement simulate` does over the same members.
    const members = nodes.map((n) => `${n.id}:${n.weight}`).join(',');
    await page.getByLabel('Add a node').fill('node-x:4');
    await page.getByRole('button', { name: 'Simulate' }).click();
    await page.getByTestId('what-if').waitFor();
    const simulated = await berth(
      'placement',
      'simulate',
      '--nodes',
      members,
      '--add',
      'node-x:4',
      '--segments',
      '10000',
      '--json',
    );
    const added = JSON.parse(simulated.stdout) as SimulationResult;
    expect(await page.getByTestId('what-if-moved').textContent()).toBe(added.moved.segments.toLocaleString('en'));
    expect((await page.getByTestId('what-if-after').allTextContents()).map(Number)).toEqual(
      Object.keys(added.after)
        .sort()
        .map((id) => added.after[id]!.segments),
    );
    // Only the new node gains: what moves is about its weight's share, 4 of 14 vCPU.
    expect(added.moved.segments).toBe(added.after['node-x']!.segments);
    expect(added.moved.fraction).toBeCloseTo(4 / 14, 1);
    await shoot('cluster-what-if');

    // Removing the 2-vCPU node moves exactly the segments it owned.
    const small = nodes.find((n) => n.weight === 2)!;
    await page.getByLabel('Add a node').fill('');
    await page.getByLabel('Remove a node').selectOption(small.id);
    await page.getByRole('button', { name: 'Simulate' }).click();
    await page.getByTestId('what-if').getByText(`--remove ${small.id}`).waitFor();
    const removed = JSON.parse(
      (await berth('placement', 'simulate', '--nodes', members, '--remove', small.id, '--segments', '10000', '--json'))
        .stdout,
    ) as SimulationResult;
    expect(await page.getByTestId('what-if-moved').textContent()).toBe(removed.moved.segments.toLocaleString('en'));
    expect(removed.moved.segments).toBe(removed.before[small.id]!.segments);

    // A change the page did not send (no console header, as another site's form would) is refused.
    const forged = await page.evaluate(
      `fetch('/console/api/query', { method: 'POST', headers: { 'content-type': 'application/json' }, body: '{"sql":"SELECT 1"}' }).then((r) => r.status)`,
    );
    expect(forged).toBe(403);
  });

  it('shows each table with its segments and their days, as the API counts them', async () => {
    await page.getByRole('link', { name: 'Tables' }).click();
    const events = page.getByTestId('table-card').filter({ has: page.getByRole('heading', { name: 'events' }) });
    await events.waitFor();
    expect(await page.getByTestId('table-card').count()).toBe((await api.tables()).length);
    const [segments, { days }] = await Promise.all([api.table('events'), api.tableDays('events')]);
    expect(await events.getByTestId('table-segments').textContent()).toBe(String(segments.segments));
    // The chart's bars: the API's days and counts, three segments starting on each of two days.
    const bars = events.getByTestId('segment-day');
    expect(await bars.evaluateAll((li) => li.map((e) => e.getAttribute('data-day')))).toEqual(days.map((d) => d.day));
    expect(await events.getByTestId('segment-day-count').allTextContents()).toEqual(
      days.map((d) => String(d.segments)),
    );
    expect(days.map((d) => [d.day, d.segments])).toEqual([
      ['2026-11-01', 3],
      ['2026-11-02', 3],
    ]);
    expect(days.reduce((sum, d) => sum + d.rows, 0)).toBe(EVENTS);
    await shoot('tables');
  });

  it('shows the heavy pools, parked, with admission, layers, workflow links and a preflight', async () => {
    await page.getByRole('link', { name: 'Heavy pools' }).click();
    await page.getByTestId('pool-card').first().waitFor();
    expect(await page.getByTestId('pool-phase').allTextContents()).toEqual(['parked', 'parked']);
    expect(await page.getByRole('link', { name: 'workflow heavy-pool-heavy', exact: true }).getAttribute('href')).toBe(
      `${endpoints.temporalUi}/namespaces/default/workflows/heavy-pool-heavy`,
    );
    // Admission: every workload group as the coordinator's /v1/workload-groups gives it (all idle).
    const [admission, groups] = await Promise.all([
      page
        .locator('[data-testid=admission] tbody tr')
        .evaluateAll((rows) => rows.map((r) => [...r.querySelectorAll('td')].map((td) => td.textContent))),
      api.workloadGroups(),
    ]);
    expect(admission).toEqual(
      groups.map((g) => [
        g.name,
        String(g.running),
        String(g.waiting),
        String(g.maxConcurrency ?? '-'),
        String(g.maxQueueSize ?? '-'),
        g.unavailable ?? '',
      ]),
    );
    expect(groups.map((g) => g.name)).toEqual(expect.arrayContaining(['heavy', 'heavy-memory']));

    // The preflight, run from the page, reports what the controller's reports.
    const memory = page.getByTestId('pool-card').filter({ hasText: 'heavy-memory' });
    await memory.getByRole('button', { name: 'Run preflight of heavy-memory' }).click();
    await memory.getByTestId('preflight-summary').waitFor({ timeout: 60_000 });
    const preflight = await new ControllerClient(endpoints.controller, token).preflight('heavy-memory');
    expect(await memory.getByTestId('preflight-summary').textContent()).toBe(
      `preflight of heavy-memory on local: ${preflight.findings === 0 ? 'no findings' : `${preflight.findings} finding${preflight.findings === 1 ? '' : 's'}`}`,
    );
    expect(await memory.getByTestId('preflight-check').allTextContents()).toEqual(
      preflight.checks.map((c) => `${c.ok ? 'ok' : 'FAIL'} ${c.area}: ${c.summary}${c.fix ? ` (fix: ${c.fix})` : ''}`),
    );
    await shoot('pools');
  }, 90_000);

  it('launches the memory class from a heavy query, shows its layers pass, then it parks', async () => {
    // One tab runs the demo's monthly window; this one watches the pools view redraw itself.
    const editor = await browser.newPage();
    await editor.goto(`${endpoints.console}#sql`);
    await editor.getByLabel('Query').fill(HEAVY_SQL);
    await editor.getByRole('button', { name: 'Run' }).click();
    const memory = page.getByTestId('pool-card').filter({ hasText: 'heavy-memory' });
    for (const layer of ['pods', 'backends', 'canary'])
      await memory.getByTestId(`layer-${layer}`).and(page.locator('.pass')).waitFor({ timeout: 90_000 });
    const status = await new ControllerClient(endpoints.controller).poolStatus('heavy-memory');
    expect(status.layersPassed).toEqual(['pods', 'backends', 'canary']);
    await expect.poll(() => memory.getByTestId('pool-phase').textContent()).toBe(status.phase);
    await shoot('pools-launched');

    await editor.getByTestId('rows').waitFor({ timeout: 60_000 });
    expect(await editor.getByRole('status').textContent()).toMatch(/ · heavy \(memory\) · route /);
    const answered = (await api.recentQueries()).queries.find((q) => q.sql === HEAVY_SQL)!;
    expect(answered.stats).toMatchObject({
      verdict: { class: 'heavy', bottleneck: 'memory' },
      pool: { workflowId: 'heavy-pool-heavy-memory' },
    });
    expect(await editor.locator('[data-testid=rows] tbody tr').count()).toBe(answered.rows);
    await editor.close();

    // Idle for HEAVY_IDLE_MS, the reaper parks the pool; its node-hours are then fixed, and the
    // page shows the controller's and the bill `berth cost` prints.
    await expect.poll(() => memory.getByTestId('pool-phase').textContent(), { timeout: 60_000 }).toBe('parked');
    const parked = await new ControllerClient(endpoints.controller).poolStatus('heavy-memory');
    expect(parked.phase).toBe('parked');
    // The page redraws every 2 s: its figures catch up with the parked pool's within a draw or two.
    await expect
      .poll(() => memory.getByTestId('pool-hours-today').textContent(), { timeout: 10_000 })
      .toBe(parked.nodeHours!.today.toFixed(3));
    expect(await memory.getByTestId('pool-hours-month').textContent()).toBe(parked.nodeHours!.month.toFixed(3));
    expect(parked.nodeHours!.today).toBeGreaterThan(0);
    const cost = JSON.parse(
      (await berth('cost', 'heavy-memory', '--json', '--data-dir', dataDir)).stdout,
    ) as CostReport;
    await expect
      .poll(() => memory.getByTestId('cost-node-hours').textContent(), { timeout: 10_000 })
      .toBe(cost.window.nodeHours.toFixed(3));
    expect(await memory.getByTestId('cost-pool').textContent()).toBe(`$${cost.bill.poolCost.toFixed(2)}`);
    expect(await memory.getByText(`resident ${cost.bill.residentNodes} node`).count()).toBe(1);
    await shoot('pools-parked');
  }, 150_000);

  it('runs a query in the editor: rows, a chart, CSV, Parquet, and cancel', async () => {
    await page.getByRole('link', { name: 'SQL' }).click();
    await page.getByLabel('Query').fill(HOURLY);
    await page.getByRole('button', { name: 'Run' }).click();
    await page.getByTestId('rows').waitFor();
    await page.locator('[data-testid=chart] canvas').first().waitFor();
    const answer = await api.query(HOURLY);
    expect(await page.locator('[data-testid=rows] tbody tr').count()).toBe(answer.rows.length);
    expect(await page.locator('[data-testid=rows] tbody tr').first().locator('td').first().textContent()).toBe(
      String(answer.rows[0]![0]),
    );
    expect(await page.getByRole('status').textContent()).toMatch(
      new RegExp(`^${answer.rows.length} rows in .* · light · route aggregate · 6 of 6 segments`),
    );
    await shoot('sql');

    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download CSV' }).click(),
    ]);
    const csv = (await readFile((await download.path())!, 'utf8')).trim().split('\r\n');
    expect(csv[0]).toBe('hour,n,latency');
    expect(csv).toHaveLength(answer.rows.length + 1);

    // Parquet: the same rows and columns, each with the type the query gave it.
    const [parquet] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Download Parquet' }).click(),
    ]);
    const duck = await (await DuckDBInstance.create(':memory:')).connect();
    const file = `read_parquet('${(await parquet.path())!.replaceAll("'", "''")}')`;
    const described = (await duck.runAndReadAll(`DESCRIBE SELECT * FROM ${file}`)).getRows();
    expect(described.map((r) => [r[0], r[1]])).toEqual(answer.columns.map((c, i) => [c, answer.types[i]]));
    const read = (await duck.runAndReadAll(`SELECT count(*)::INTEGER, min(hour)::VARCHAR FROM ${file}`)).getRows();
    expect(read).toEqual([[answer.rows.length, String(answer.rows[0]![0])]]);
    duck.closeSync();

    // Cancel: the request is abandoned, and the coordinator stops the query (logged as failed).
    await page.getByLabel('Query').fill(SLOW);
    await page.getByRole('button', { name: 'Run' }).click();
    await page.getByText('running…').waitFor();
    await page.waitForTimeout(500);
    await page.getByRole('button', { name: 'Cancel' }).click();
    await page.getByText('cancelled').waitFor();
    await expect
      .poll(async () => (await api.recentQueries()).queries.find((q) => q.sql === SLOW)?.error, { timeout: 20_000 })
      .toBe('the client went away');
    await page.getByLabel('Query').fill(HOURLY);
  }, 60_000);

  it('lists the recent queries with the API’s count, and opens one’s details', async () => {
    await page.getByRole('link', { name: 'Queries' }).click();
    await page.getByTestId('queries').waitFor();
    const [count, recent] = await Promise.all([page.getByTestId('query-count').textContent(), api.recentQueries()]);
    expect(Number(count)).toBe(recent.queries.length);
    const mine = recent.queries.find((q) => q.sql === HOURLY && q.stats)!;
    await page.getByRole('link', { name: `details of query ${mine.id}` }).click();
    await page.getByTestId('query-details').waitFor();
    expect(await page.getByTestId('query-sql').textContent()).toBe(HOURLY);
    const details = (await page.getByTestId('query-details').textContent()) ?? '';
    expect(details).toContain(`route${mine.stats!.route}`);
    expect(details).toContain(`verdict${mine.stats!.verdict.class}`);
    await shoot('query-details');

    await page.getByRole('link', { name: 'all queries' }).click();
    await page.getByLabel('Verdict').selectOption('heavy');
    expect(await page.locator('[data-testid=queries] tbody tr').count()).toBe(
      recent.queries.filter((q) => q.stats?.verdict.class === 'heavy').length,
    );
    await page.getByLabel('Verdict').selectOption('failed');
    expect(await page.locator('[data-testid=queries] tbody tr').count()).toBe(
      recent.queries.filter((q) => q.error).length,
    );
    await shoot('queries');
  });

  it('logs out: the session is gone and the API answers 401 again', async () => {
    await page.getByRole('button', { name: 'Log out' }).click();
    await page.getByLabel('Cluster token').waitFor();
    expect(await status('/console/api/nodes')).toBe(401);
    // The 401s and the 403 this test asked for are the only errors the page met.
    expect(problems.filter((p) => !/status of 40[13] \((Unauthorized|Forbidden)\)/.test(p))).toEqual([]);
  });
});

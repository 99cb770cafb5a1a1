/**
 * The bill: node-hours from the pool's own ledger, priced against a resident pool, and compute
 * concentration from the coordinator's query log. The ledger is held to the seed's burst pattern
 * (2 nodes, 2 hours a day, bursts across midnight), and `berth cost` over a real pool workflow's
 * launches is held to the node-hours its Temporal history records, exactly, and the saving to the
 * cent.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { defaultPayloadConverter } from '@temporalio/common';
import { NativeConnection, Worker } from '@temporalio/worker';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import type { HeavyPoolActivities } from '../activities/heavy-pool.js';
import type { CostReport } from '../cli/commands/cost.js';
import { concentration, type LoggedQuery } from '../core/compute-concentration.js';
import {
  bill,
  HOUR_MS,
  LEDGER_DAYS,
  nodeHoursNow,
  recordReplicas,
  usageWindow,
  windowStart,
  type NodeUsage,
} from '../core/node-hours.js';
import { buildControllerApp } from '../services/controller/app.js';
import { launchPool, poolStatus } from '../workflows/pool-client.js';
import { poolWorkflowId, type PoolConfig } from '../workflows/contracts/heavy-pool.js';
import { registerSearchAttributes } from '../workers/search-attributes.js';
import { berth, cliDataDir } from './helpers/berth-cli.js';
import { temporalClient, workflowBundle } from './helpers/berth-worker.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { runsOf } from './helpers/history.js';

const at = (iso: string) => Date.parse(iso);
const cents = (dollars: number) => Math.round(dollars * 100) / 100;

describe('the node-hours ledger', () => {
  it('counts the seed’s burst pattern exactly: 2 nodes for 2 hours a day over 30 days is 120 node-hours, bursts across midnight split by day', () => {
    let usage: NodeUsage = { days: {} };
    for (let day = 1; day <= 30; day++) {
      const date = `2026-11-${String(day).padStart(2, '0')}`;
      if (day % 2 === 0 && day < 30) {
        // 23:00 to 01:00 the next day.
        usage = recordReplicas(usage, at(`${date}T23:00:00Z`), 2);
        usage = recordReplicas(usage, at(`${date}T23:00:00Z`) + 2 * HOUR_MS, 0);
      } else {
        usage = recordReplicas(usage, at(`${date}T10:00:00Z`), 2);
        usage = recordReplicas(usage, at(`${date}T12:00:00Z`), 0);
      }
    }
    expect(usage.open).toBeUndefined();
    expect(usage.days['2026-11-02']).toEqual({ nodeMs: 2 * HOUR_MS, peak: 2 }); // 23:00-24:00 only
    expect(usage.days['2026-11-03']).toEqual({ nodeMs: 6 * HOUR_MS, peak: 2 }); // 00:00-01:00 and 10:00-12:00
    const now = at('2026-11-30T12:00:00Z');
    const window = usageWindow(usage, windowStart(now, 30), now);
    expect(window).toMatchObject({
      fromDay: '2026-11-01',
      nodeMs: 120 * HOUR_MS,
      nodeHours: 120,
      peak: 2,
      hours: 29.5 * 24,
    });
    // The seed's figures: ~$63 a month bursting against ~$772 resident (here 29.5 days of it).
    expect(bill(window, 0.5288, 2)).toEqual({
      pricePerNodeHour: 0.5288,
      nodeHours: 120,
      poolCost: 63.46,
      residentNodes: 2,
      residentCost: 748.78,
      saving: 685.32,
      savingFraction: (748.78 - 63.46) / 748.78,
    });
    expect(bill(usageWindow(usage, '2026-11-01', at('2026-12-01T00:00:00Z')), 772 / 2 / 720, 2)).toMatchObject({
      residentCost: 772,
      poolCost: 64.33,
    });
  });

  it('counts replicas still in force up to now, splits today from this month, and keeps 400 days', () => {
    let usage = recordReplicas({ days: {} }, at('2026-11-29T22:00:00Z'), 4);
    const now = at('2026-11-30T01:30:00Z');
    expect(nodeHoursNow(usage, now)).toEqual({ today: 6, month: 14 });
    usage = recordReplicas(usage, at('2026-12-01T00:00:00Z'), 0);
    expect(nodeHoursNow(usage, at('2026-12-01T09:00:00Z'))).toEqual({ today: 0, month: 0 });
    // 400 days on, the ledger holds that day and the 399 before it.
    const later = recordReplicas(usage, at('2026-11-30T00:00:00Z') + (LEDGER_DAYS - 1) * 86_400_000, 1);
    expect(Object.keys(later.days)).toEqual(['2026-11-30']);
  });
});

describe('compute concentration', () => {
  it('finds the seed’s shape: the heavy 3 % of queries take nearly all of the time, and names the threshold that sends them', () => {
    // 970 point lookups of 158 ms over 1 MB, 30 monthly windows of 196,354 ms over 10 GB.
    const log: LoggedQuery[] = [
      ...Array.from({ length: 970 }, (_, i) => ({
        at: i,
        scanBytes: 1_000_000,
        computeMs: 158,
        heavy: false,
        group: 'serving',
        finalStage: 'coordinator',
      })),
      ...Array.from({ length: 30 }, (_, i) => ({
        at: 1000 + i,
        scanBytes: 10_000_000_000 + i,
        computeMs: 196_354,
        heavy: true,
        group: 'heavy',
        bottleneck: 'memory' as const,
        finalStage: i < 20 ? 'qn-a' : 'qn-b',
      })),
    ];
    const c = concentration(log);
    const totalMs = 970 * 158 + 30 * 196_354;
    expect(c).toMatchObject({
      queries: 1000,
      computeMs: totalMs,
      heavyNow: { queries: 30, timeShare: (30 * 196_354) / totalMs },
    });
    const [one, three, ten] = c.tops;
    expect(three).toMatchObject({
      top: 0.03,
      queries: 30,
      scanThreshold: 10_000_000_000,
      sent: 30,
      timeShare: (30 * 196_354) / totalMs,
      sentTimeShare: (30 * 196_354) / totalMs,
    });
    expect(three!.timeShare).toBeGreaterThan(0.97);
    expect(one).toMatchObject({ queries: 10, scanThreshold: 10_000_000_020, sent: 10 });
    // The top 10 % reaches into the lookups, whose sizes tie: the threshold that takes 10 % sends them all.
    expect(ten).toMatchObject({ queries: 100, scanThreshold: 1_000_000, sent: 1000, sentTimeShare: 1 });
    expect(concentration([]).tops).toEqual([]);
    // Where they ran: the lookups on the serving group, the windows' final stages on two heavy backends.
    expect(c.placements).toEqual([
      {
        group: 'serving',
        queries: 970,
        timeShare: (970 * 158) / totalMs,
        finalStages: [{ host: 'coordinator', queries: 970 }],
      },
      {
        group: 'heavy',
        bottleneck: 'memory',
        queries: 30,
        timeShare: (30 * 196_354) / totalMs,
        finalStages: [
          { host: 'qn-a', queries: 20 },
          { host: 'qn-b', queries: 10 },
        ],
      },
    ]);
  });
});

describe('berth cost over a real pool’s launches', () => {
  let client: Client;
  let connection: NativeConnection;
  let worker: Worker;
  let running: Promise<void>;
  let cluster: TestCluster;
  let controller: ReturnType<typeof buildControllerApp>;
  let dataDir: string;
  const taskQueue = `cost-${randomUUID()}`;
  const group = `cost-${randomUUID().slice(0, 8)}`;
  const config: PoolConfig = { group, increment: 1, maxReplicas: 2, idleTimeoutMs: 1_500, readinessConfirmMs: 20 };
  // The platform answers at once: the ledger is what is under test.
  const activities: HeavyPoolActivities = {
    async setReplicas({ replicas }) {
      return { changed: true, previous: replicas };
    },
    async observePool({ wants }) {
      return {
        pods: wants.pods,
        backends: Array.from({ length: wants.backends }, (_, i) => ({
          id: `b-${randomUUID()}-${i}`,
          url: 'http://127.0.0.1:9',
        })),
        confirmed: true,
      };
    },
    async canaryScan({ backends }) {
      return backends.map((b) => ({ id: b.id, ok: true }));
    },
    async releaseGroupLeases() {
      return [];
    },
    async parkOrphanedGroups() {
      return { parked: [] };
    },
  };

  beforeAll(async () => {
    client = await temporalClient();
    connection = await NativeConnection.connect({ address: inject('temporalAddress') });
    await registerSearchAttributes(connection, 'default'); // as every Berth worker does before it polls
    worker = await Worker.create({ connection, taskQueue, workflowBundle: await workflowBundle(), activities });
    running = worker.run();
    cluster = await startCluster({ vcpus: [2] });
    controller = buildControllerApp({ client, pools: [config], token: TOKEN, taskQueue, logger: false });
    dataDir = await cliDataDir(
      cluster.dir,
      { controller: await controller.listen({ host: '127.0.0.1', port: 0 }), coordinator: cluster.coordinator.url },
      TOKEN,
    );
  });
  afterAll(async () => {
    await client?.workflow
      .getHandle(poolWorkflowId(group))
      .terminate('test over')
      .catch(() => {});
    worker?.shutdown();
    await running;
    await connection?.close();
    await controller?.close();
    await cluster?.close();
    await client?.connection.close();
  });

  /**
   * Node-milliseconds as the pool's history records them: each replicas write takes effect at the
   * workflow task that saw it complete (the workflow's clock is that task's start).
   */
  async function nodeMsFromHistory(): Promise<{
    nodeMs: number;
    peak: number;
    since: (from: number, to: number) => number;
  }> {
    const changes: { at: number; replicas: number }[] = [];
    for (const runId of (await runsOf(client, poolWorkflowId(group))).reverse()) {
      const { events } = await client.workflow.getHandle(poolWorkflowId(group), runId).fetchHistory();
      const asked = new Map<string, number>();
      let completed: number[] = [];
      for (const event of events ?? []) {
        const scheduled = event.activityTaskScheduledEventAttributes;
        if (scheduled?.activityType?.name === 'setReplicas') {
          asked.set(
            String(event.eventId),
            defaultPayloadConverter.fromPayload<{ replicas: number }>(scheduled.input!.payloads![0]!).replicas,
          );
        }
        const done = event.activityTaskCompletedEventAttributes;
        if (done && asked.has(String(done.scheduledEventId))) completed.push(asked.get(String(done.scheduledEventId))!);
        if (event.workflowTaskStartedEventAttributes && completed.length > 0) {
          const time = Number(event.eventTime!.seconds) * 1000 + Math.floor(event.eventTime!.nanos! / 1e6);
          for (const replicas of completed) changes.push({ at: time, replicas });
          completed = [];
        }
      }
    }
    /** Node-milliseconds in force within [from, to). */
    const since = (from: number, to: number) => {
      let nodeMs = 0;
      for (let i = 0; i + 1 < changes.length; i++)
        nodeMs += changes[i]!.replicas * Math.max(0, Math.min(to, changes[i + 1]!.at) - Math.max(from, changes[i]!.at));
      return nodeMs;
    };
    return { nodeMs: since(0, Infinity), peak: Math.max(...changes.map((c) => c.replicas)), since };
  }

  it(
    'reproduces the node-hours of known launches exactly, and the saving to the cent',
    { timeout: 120_000 },
    async () => {
      // Launch to 1, raise to 2, idle until parked; then a second launch of 1, parked again.
      await launchPool({ client, taskQueue, config }, 1);
      await expect.poll(async () => (await poolStatus({ client, group })).serveReady, { timeout: 20_000 }).toBe(true);
      await launchPool({ client, taskQueue, config }, 2);
      await expect.poll(async () => (await poolStatus({ client, group })).replicasPatched, { timeout: 20_000 }).toBe(2);
      await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 30_000 }).toBe('parked');
      await launchPool({ client, taskQueue, config }, 1);
      await expect.poll(async () => (await poolStatus({ client, group })).serveReady, { timeout: 20_000 }).toBe(true);
      await expect.poll(async () => (await poolStatus({ client, group })).phase, { timeout: 30_000 }).toBe('parked');

      const recorded = await nodeMsFromHistory();
      expect(recorded.nodeMs).toBeGreaterThan(0);
      expect(recorded.peak).toBe(2);
      const status = await poolStatus({ client, group });
      const midnight = at(`${new Date().toISOString().slice(0, 10)}T00:00:00Z`);
      expect(status.nodeHours!.today).toBe(recorded.since(midnight, Infinity) / HOUR_MS);

      const cli = await berth(
        'cost',
        group,
        '--since',
        '2d',
        '--price-per-node-hour',
        '0.5288',
        '--json',
        '--data-dir',
        dataDir,
      );
      expect(cli.stderr).toBe('');
      const report = JSON.parse(cli.stdout) as CostReport;
      expect(report.window).toMatchObject({
        nodeMs: recorded.nodeMs,
        nodeHours: recorded.nodeMs / HOUR_MS,
        peak: 2,
        days: 2,
      });
      const pool = cents((recorded.nodeMs / HOUR_MS) * 0.5288);
      const resident = cents(2 * report.window.hours * 0.5288);
      expect(report.bill).toMatchObject({
        poolCost: pool,
        residentNodes: 2,
        residentCost: resident,
        saving: cents(resident - pool),
      });

      const human = await berth('cost', group, '--since', '2d', '--resident-nodes', '3', '--data-dir', dataDir);
      expect(human.stdout).toMatch(new RegExp(`node-hours +${(recorded.nodeMs / HOUR_MS).toFixed(2)} +peak 2 nodes`));
      expect(human.stdout).toMatch(/resident 3 nodes/);
      expect((await berth('cost', group, '--since', 'a month', '--data-dir', dataDir)).stderr).toContain(
        '--since: "a month" must be whole days, 1d to 400d',
      );
    },
  );

  it(
    'reads compute concentration from the queries the coordinator logged: their scanned bytes and times',
    { timeout: 60_000 },
    async () => {
      await cluster.ingestEvents('events', 4, 300);
      const answers = [];
      for (const sql of [
        "SELECT count(*) FROM events WHERE ts < '2026-11-01T06:00:00Z'",
        'SELECT count(*) FROM events',
        'SELECT service, count(*) FROM events GROUP BY service',
        'SELECT max(ts) FROM events',
      ]) {
        answers.push((await cluster.query(sql)).body.stats);
      }
      const report = JSON.parse((await berth('cost', group, '--json', '--data-dir', dataDir)).stdout) as CostReport;
      const c = report.concentration;
      expect(c.queries).toBe(4);
      expect(c.scanBytes).toBe(answers.reduce((sum, s) => sum + s.scanBytes, 0));
      expect(c.tops[0]!.scanThreshold).toBe(Math.max(...answers.map((s) => s.scanBytes)));
      expect(c.heavyNow.queries).toBe(0);
      expect(c.placements).toEqual([
        {
          group: 'serving',
          queries: 4,
          timeShare: c.computeMs > 0 ? 1 : 0,
          finalStages: [{ host: 'coordinator', queries: 4 }],
        },
      ]);
      const human = (await berth('cost', group, '--data-dir', dataDir)).stdout;
      expect(human).toMatch(/compute concentration over the last 4 queries this coordinator answered/);
      expect(human).toMatch(/where they ran\n.*\n +serving +4 +[\d.]+% +coordinator \(4\)/);
    },
  );
});

/**
 * Serving-group autoscaling, opt-in: the decision and the plan as pure functions, the coordinator's
 * load reports, and the whole loop on a real cluster: queries waiting on a coordinator add one
 * serving node (its moved share and expected cache-hit dip planned before the write), an idle
 * group gives it back, and the floor holds.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { LocalPlatform } from '../activities/platform/local-platform.js';
import { decideServingScale, planServingChange, type ServingScaleSettings } from '../core/serving-scale.js';
import { buildControllerApp } from '../services/controller/app.js';
import { servingScalerStatus } from '../workflows/serving-scaler-client.js';
import { ServingLoadReporter } from '../services/coordinator/admission/serving-load.js';
import { servingScalerWorkflowId, type ServingScalerConfig } from '../workflows/contracts/serving-scaler.js';
import { berth, cliDataDir } from './helpers/berth-cli.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';
import { runsOf } from './helpers/history.js';

const settings: ServingScaleSettings = { floor: 1, max: 3, waitingThreshold: 2, sustainMs: 1_000, idleMs: 5_000 };

describe('the serving scaler’s decisions', () => {
  it('adds one node after waiting above the threshold lasts the sustain window, never past the maximum', () => {
    const now = 100_000;
    expect(decideServingScale({ replicas: 1, running: 4, waiting: 2, now }, settings)).toEqual({});
    expect(decideServingScale({ replicas: 1, running: 4, waiting: 3, now }, settings)).toEqual({
      pressedSince: now,
      wakeAt: now + 1_000,
    });
    expect(decideServingScale({ replicas: 1, running: 4, waiting: 3, pressedSince: now - 999, now }, settings)).toEqual(
      { pressedSince: now - 999, wakeAt: now + 1 },
    );
    expect(
      decideServingScale({ replicas: 1, running: 4, waiting: 3, pressedSince: now - 1_000, now }, settings),
    ).toEqual({ step: { to: 2, reason: '3 queries waiting (above 2) for 1 s' } });
    expect(
      decideServingScale({ replicas: 3, running: 4, waiting: 30, pressedSince: now - 60_000, now }, settings),
    ).toEqual({ pressedSince: now - 60_000 });
  });

  it('removes one node after an idle window, never below the floor; any query ends the idle window', () => {
    const now = 100_000;
    expect(decideServingScale({ replicas: 2, running: 0, waiting: 0, idleSince: now - 5_000, now }, settings)).toEqual({
      step: { to: 1, reason: 'idle for 5 s' },
    });
    expect(decideServingScale({ replicas: 2, running: 0, waiting: 0, now }, settings)).toEqual({
      idleSince: now,
      wakeAt: now + 5_000,
    });
    expect(decideServingScale({ replicas: 2, running: 1, waiting: 0, idleSince: now - 60_000, now }, settings)).toEqual(
      {},
    );
    expect(decideServingScale({ replicas: 1, running: 0, waiting: 0, idleSince: now - 60_000, now }, settings)).toEqual(
      { idleSince: now - 60_000 },
    );
  });

  it('plans a step by the weight it moves: a node of the median weight joining takes its share of the new total', () => {
    expect(planServingChange({ weights: [4, 4, 2], from: 3, to: 4, totalBytes: 1_000, reason: 'r', at: 1 })).toEqual({
      at: 1,
      from: 3,
      to: 4,
      reason: 'r',
      members: 3,
      movedShare: 4 / 14,
      movedBytes: 286,
      expectedHitRateDip: 4 / 14,
    });
    expect(
      planServingChange({ weights: [2, 2, 2, 2], from: 4, to: 3, totalBytes: 1_000, reason: 'r', at: 1 }),
    ).toMatchObject({ movedShare: 0.25, movedBytes: 250 });
  });
});

describe('a coordinator’s serving load reports', () => {
  it('reports while there are queries, once more when they are gone, then nothing', async () => {
    let load = { running: 0, waiting: 0 };
    const sent: (typeof load)[] = [];
    let refuse = false;
    const reporter = new ServingLoadReporter({
      read: () => load,
      send: async (l) => {
        if (refuse) throw new Error('unreachable');
        sent.push(l);
      },
      onError: () => {},
    });
    await reporter.tick();
    load = { running: 16, waiting: 5 };
    await reporter.tick();
    await reporter.tick();
    load = { running: 0, waiting: 0 };
    refuse = true;
    await reporter.tick(); // lost: sent again at the next tick
    refuse = false;
    await reporter.tick();
    await reporter.tick();
    expect(sent).toEqual([
      { running: 16, waiting: 5 },
      { running: 16, waiting: 5 },
      { running: 0, waiting: 0 },
    ]);
  });
});

describe('the serving group scaled by its waiting queries', () => {
  let cluster: TestCluster;
  let client: Client;
  let worker: RunningWorker;
  let platform: LocalPlatform;
  let controller: ReturnType<typeof buildControllerApp>;
  let dataDir: string;
  const taskQueue = `serving-${randomUUID()}`;
  const group = `serving-${randomUUID().slice(0, 8)}`;
  const config: ServingScalerConfig = { group, floor: 1, max: 2, waitingThreshold: 0, sustainMs: 500, idleMs: 3_000 };

  beforeAll(async () => {
    cluster = await startCluster({
      vcpus: [],
      // One query at a time on the coordinator, which serves the scaled group; room in its line for the whole burst.
      coordinator: {
        group,
        maxConcurrency: 1,
        maxQueueSize: 64,
        queueTimeoutMs: 120_000,
        servingScaler: { temporalAddress: inject('temporalAddress'), taskQueue, config, reportEveryMs: 200 },
      },
    });
    // The group's nodes are the platform's: the local driver starts and stops them as replicas change.
    platform = new LocalPlatform({
      startBackend: async () => {
        const node = await cluster.addNode({ vcpus: 2, group });
        let closed!: () => void;
        const exited = new Promise<void>((resolve) => (closed = resolve));
        return {
          exited,
          stop: async () => {
            cluster.nodes.splice(cluster.nodes.indexOf(node), 1);
            await node.close();
            closed();
          },
        };
      },
    });
    await platform.setReplicas(group, 1);
    while (cluster.nodes.length === 0) await new Promise((resolve) => setTimeout(resolve, 50));
    await cluster.awaitMembers(cluster.nodes.map((n) => n.id));
    await cluster.ingestEvents('events', 3, 200);
    client = await temporalClient();
    worker = await startWorker(cluster, taskQueue, { servingScaler: { platform } });
    controller = buildControllerApp({
      client,
      pools: [],
      servingScaler: config,
      token: TOKEN,
      taskQueue,
      logger: false,
    });
    dataDir = await cliDataDir(
      cluster.dir,
      { controller: await controller.listen({ host: '127.0.0.1', port: 0 }), coordinator: cluster.coordinator.url },
      TOKEN,
    );
  });
  afterAll(async () => {
    await client?.workflow
      .getHandle(servingScalerWorkflowId(group))
      .terminate('test over')
      .catch(() => {});
    await worker?.stop();
    await controller?.close();
    await platform?.close();
    await client?.connection.close();
    await cluster?.close();
  });

  it(
    'adds one node for sustained waiting, saying what moves before it acts, and gives it back when idle, never below the floor',
    { timeout: 180_000 },
    async () => {
      const status = () => servingScalerStatus({ client, config });
      // One query at a time: eight clients, each sending its next query as soon as one is answered,
      // keep queries waiting on the coordinator until the scaler steps, however fast a query is
      // (a fixed burst can drain before the workflow has even read the replicas).
      let stepped = false;
      const statuses: number[] = [];
      const clients = Array.from({ length: 8 }, async () => {
        while (!stepped)
          statuses.push((await cluster.query('SELECT service, count(*) FROM events GROUP BY service')).status);
      });
      try {
        await expect.poll(async () => (await status()).steps.length, { timeout: 60_000 }).toBeGreaterThanOrEqual(1);
      } finally {
        stepped = true;
        await Promise.all(clients);
      }
      expect(statuses).toEqual(Array(statuses.length).fill(200));
      const [up] = (await status()).steps;
      expect(up).toMatchObject({ from: 1, to: 2, members: 1, movedShare: 0.5, expectedHitRateDip: 0.5 });
      expect(up!.reason).toMatch(/^\d+ queries waiting \(above 0\) for \d+ s$/);
      await expect.poll(async () => (await cluster.meta.members(group)).length, { timeout: 60_000 }).toBe(2);

      // Said before it was done: every write comes right after its plan completed (in whichever run
      // took the step: reports make the workflow continue as new often here).
      let writes = 0;
      for (const runId of await runsOf(client, servingScalerWorkflowId(group))) {
        const { events } = await client.workflow.getHandle(servingScalerWorkflowId(group), runId).fetchHistory();
        const names = new Map<string, string>();
        const run: string[] = [];
        for (const event of events ?? []) {
          const scheduled = event.activityTaskScheduledEventAttributes;
          if (scheduled) {
            names.set(String(event.eventId), scheduled.activityType!.name!);
            run.push(`scheduled ${scheduled.activityType!.name}`);
          }
          const done = event.activityTaskCompletedEventAttributes;
          if (done) run.push(`completed ${names.get(String(done.scheduledEventId))}`);
        }
        run.forEach((step, i) => {
          if (step !== 'scheduled scaleServing') return;
          writes++;
          expect(run[i - 1]).toBe('completed planServingStep');
        });
      }
      expect(writes).toBe(1); // so far: the step up

      // Idle: back to the floor, and no further.
      await expect.poll(async () => (await status()).replicas, { timeout: 60_000 }).toBe(1);
      const down = (await status()).steps[1]!;
      expect(down).toMatchObject({
        from: 2,
        to: 1,
        members: 2,
        movedShare: 0.5,
        reason: expect.stringMatching(/^idle for \d+ s$/),
      });
      await expect.poll(async () => (await cluster.meta.members(group)).length, { timeout: 60_000 }).toBe(1);
      await new Promise((resolve) => setTimeout(resolve, 2 * config.idleMs!)); // two more idle windows: nothing happens
      expect(await status()).toMatchObject({ replicas: 1, steps: [up, down] });
      expect(await platform.replicas(group)).toBe(1);

      const cli = await berth('serving', 'status', group, '--data-dir', dataDir);
      expect(cli.stdout).toContain(`${group} autoscaler: 1 replicas (floor 1, max 2)`);
      expect(cli.stdout).toMatch(
        /1 → 2 \(\d+ queries waiting \(above 0\) for \d+ s\): about 50\.0% of segments \([\d.]+Ki\) change owner; expect the cache-hit rate 50\.0% lower until they are warm/,
      );
    },
  );
});

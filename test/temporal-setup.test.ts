/**
 * Berth on a Temporal server that has never seen it: a second, bare dev server (the run's shared
 * one is bare too, and every worker in the suite registers on it). `berth setup` registers the
 * search attributes; a merge and a heavy-pool launch then run there and are found by them.
 */
import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import proto from '@temporalio/proto';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolveTemporalCli } from '../cli/embedded/temporal-cli.js';
import { startTemporalDevServer, type TemporalDevServer } from '../cli/embedded/temporal-server.js';
import { launchPool } from '../workflows/pool-client.js';
import { ensureMergeSchedule } from '../workers/schedules.js';
import { registerSearchAttributes, registerSearchAttributesOrWarn } from '../workers/search-attributes.js';
import { mergeTaskQueueFor, SEARCH_ATTRIBUTES } from '../workflows/contracts/shared.js';
import { poolWorkflowId } from '../workflows/contracts/heavy-pool.js';
import { mergeScheduleId } from '../workflows/contracts/segment-merge.js';
import { segmentMergeWorkflow } from '../workflows/index.js';
import { berth } from './helpers/berth-cli.js';
import { startWorker, temporalClient, type RunningWorker } from './helpers/berth-worker.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';
import { recordingPlatform } from './fakes/recording-platform.js';

const BERTH_ATTRIBUTES = Object.values(SEARCH_ATTRIBUTES)
  .map((key) => key.name)
  .sort();

describe('berth setup on a bare Temporal server', () => {
  let temporal: TemporalDevServer;
  let client: Client;
  let cluster: TestCluster;
  let worker: RunningWorker | undefined;
  const taskQueue = `setup-${randomUUID()}`;
  const { platform, replicas } = recordingPlatform();
  const registered = async () => {
    const { customAttributes } = await client.connection.operatorService.listSearchAttributes({ namespace: 'default' });
    return Object.keys(customAttributes ?? {})
      .filter((name) => name.startsWith('Berth'))
      .sort();
  };

  beforeAll(async () => {
    temporal = await startTemporalDevServer({ executable: await resolveTemporalCli() });
    client = await temporalClient(temporal.address);
    cluster = await startCluster({ vcpus: [2] });
  });
  afterAll(async () => {
    await worker?.stop();
    await client?.connection.close();
    await cluster?.close();
    await temporal?.stop();
  });

  it('registers Berth’s search attributes once, and says so', async () => {
    expect(await registered()).toEqual([]);
    const first = await berth('setup', '--temporal', temporal.address);
    expect(first.code, first.stderr).toBe(0);
    for (const name of BERTH_ATTRIBUTES) expect(first.stdout).toContain(`search attribute ${name} registered`);
    expect(await registered()).toEqual(BERTH_ATTRIBUTES);

    const again = await berth('setup', '--temporal', temporal.address, '--namespace', 'default');
    expect(again.code, again.stderr).toBe(0);
    for (const name of BERTH_ATTRIBUTES) expect(again.stdout).toContain(`search attribute ${name} already there`);
  });

  it('refuses an unknown namespace with a message that names it', async () => {
    const result = await berth(
      'setup',
      '--temporal',
      temporal.address,
      '--namespace',
      'no-such-namespace',
      '--wait-ms',
      '0',
    );
    expect(result.code).not.toBe(0);
    expect(result.stderr).toContain('no-such-namespace');
  });

  it('then runs a merge there, found by table and partition, and keeps a schedule there', async () => {
    worker = await startWorker(cluster, taskQueue, { temporalAddress: temporal.address, heavyPool: { platform } });
    await cluster.ingestEvents('events', 3, 40);
    const workflowId = `setup-merge-${randomUUID()}`;
    const result = await client.workflow.execute(segmentMergeWorkflow, {
      taskQueue: mergeTaskQueueFor(taskQueue),
      workflowId,
      args: [{ table: 'events', partition: '20261101' }],
    });
    expect(result.outcome).toBe('merged');
    await expect
      .poll(async () => {
        const ids: string[] = [];
        for await (const run of client.workflow.list({
          query: `BerthTable = 'events' AND BerthPartition = '20261101'`,
        }))
          ids.push(run.workflowId);
        return ids;
      })
      .toContain(workflowId);

    expect(await ensureMergeSchedule(client, 'events', { taskQueue: mergeTaskQueueFor(taskQueue) })).toBe('created');
    await client.schedule.getHandle(mergeScheduleId('events')).delete();
  });

  it('then launches a heavy pool there, found by its group', async () => {
    const group = `setup-${randomUUID().slice(0, 8)}`;
    const accepted = await launchPool({ client, taskQueue, config: { group, increment: 2, maxReplicas: 2 } }, 1);
    expect(accepted).toMatchObject({ workflowId: poolWorkflowId(group), accepted: 2 });
    await expect.poll(() => replicas.get(group), { timeout: 20_000 }).toBe(2);
    await expect
      .poll(async () => {
        const ids: string[] = [];
        for await (const run of client.workflow.list({ query: `BerthGroup = '${group}'` })) ids.push(run.workflowId);
        return ids;
      })
      .toEqual([poolWorkflowId(group)]);
    await client.workflow.getHandle(poolWorkflowId(group)).terminate('test over');
  });
});

describe('a worker on a namespace it may not change', () => {
  const refusing = (code: number) =>
    ({
      operatorService: {
        listSearchAttributes: () =>
          Promise.reject(Object.assign(new Error(`refused with gRPC code ${code}`), { code })),
        addSearchAttributes: () => Promise.reject(new Error('never called')),
      },
    }) as unknown as Parameters<typeof registerSearchAttributesOrWarn>[0];

  it('warns and starts when the server denies it, since an operator may have registered them', async () => {
    const warnings: string[] = [];
    await registerSearchAttributesOrWarn(refusing(7), 'cloud-ns', (w) => warnings.push(w));
    expect(warnings).toHaveLength(1);
    expect(warnings[0]).toMatch(/may not register Berth's search attributes on "cloud-ns".*berth setup/);
  });

  it('does not start when the server fails otherwise', async () => {
    await expect(registerSearchAttributesOrWarn(refusing(14), 'down-ns', () => {})).rejects.toThrow(/gRPC code 14/);
  });
});

describe('two workers registering the search attributes at once', () => {
  /** A namespace whose add fails with gRPC code 13 (as a concurrent add may), after `other` registered them, or not. */
  const { IndexedValueType } = proto.temporal.api.enums.v1;
  const racing = (otherRegistered: boolean) => {
    let listed: Record<string, number> = {};
    return {
      operatorService: {
        listSearchAttributes: () => Promise.resolve({ customAttributes: listed }),
        addSearchAttributes: () => {
          if (otherRegistered)
            listed = Object.fromEntries(
              Object.values(SEARCH_ATTRIBUTES).map((key) => [
                key.name,
                IndexedValueType[`INDEXED_VALUE_TYPE_${key.type}`],
              ]),
            );
          return Promise.reject(Object.assign(new Error('concurrent update'), { code: 13 }));
        },
      },
    } as unknown as Parameters<typeof registerSearchAttributes>[0];
  };

  it('goes on when its add failed because the other registered them meanwhile', async () => {
    await expect(registerSearchAttributes(racing(true), 'fresh-ns')).resolves.toMatchObject({ present: [] });
  });

  it('fails when its add failed and they are still not there', async () => {
    await expect(registerSearchAttributes(racing(false), 'fresh-ns')).rejects.toThrow(
      /could not register search attributes .* on namespace "fresh-ns"/,
    );
  });
});

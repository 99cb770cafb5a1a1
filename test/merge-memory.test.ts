/**
 * What a merge holds in the worker's memory: the merged segment's bytes go to S3 and to their
 * owner a bounded window at a time (PUBLISH_MEMORY_BYTES), however large the segment. Measured on
 * a merge whose output is over twice that window, run as the worker runs it, with the live
 * buffers of the process (a garbage collection before each sample, so that only what is still
 * held counts) sampled throughout.
 */
import { createHash } from 'node:crypto';
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { pipeline } from 'node:stream/promises';
import path from 'node:path';
import v8 from 'node:v8';
import { runInNewContext } from 'node:vm';
import { PutObjectCommand } from '@aws-sdk/client-s3';
import { MockActivityEnvironment } from '@temporalio/testing';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createMergeActivities, type MergeActivities } from '../activities/merge.js';
import { PUBLISH_MEMORY_BYTES } from '../activities/segment-publish.js';
import { segmentId, segmentObjectKey } from '../core/identifiers.js';
import { openSandboxedDuckDB, sqlString, withConnection } from '../services/common/duckdb.js';
import { mergeDeps } from './helpers/merge-deps.js';
import { startCluster, type TestCluster } from './helpers/cluster.js';

const INPUTS = 5;
const ROWS_PER_INPUT = 375_000;

v8.setFlagsFromString('--expose-gc');
const collectGarbage = runInNewContext('gc') as () => void;

describe('a merge’s memory', () => {
  let cluster: TestCluster;
  let deps: Awaited<ReturnType<typeof mergeDeps>>;

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2] });
    deps = await mergeDeps(cluster);
  });
  afterAll(async () => {
    deps?.close();
    await cluster?.close();
  });

  it(
    'stays within its stated window while it uploads and pushes a segment larger than it',
    { timeout: 180_000 },
    async () => {
      const columns = [
        { name: 'ts', type: 'TIMESTAMP' },
        { name: 'service', type: 'VARCHAR' },
        { name: 'bytes', type: 'BIGINT' },
        { name: 'request_id', type: 'VARCHAR' },
        { name: 'user_id', type: 'VARCHAR' },
      ];
      await cluster.meta.ensureTable({ name: 'big', timestampColumn: 'ts', columns });
      const scratch = await openSandboxedDuckDB({ allowedDirectories: [cluster.dir], tempDirectory: cluster.dir });
      const inputs: string[] = [];
      const day = Date.UTC(2026, 10, 1);
      for (let n = 0; n < INPUTS; n++) {
        const file = path.join(cluster.dir, `big-${n}.parquet`);
        // Hard-to-compress rows whose times interleave with the other inputs': the merge sorts for real.
        await withConnection(scratch, (c) =>
          c.run(`COPY (SELECT TIMESTAMP '2026-11-01' + to_milliseconds((i * 7919) % ${INPUTS * ROWS_PER_INPUT}) AS ts,
            ['api','web','auth'][1 + (hash(i) % 3)::INT] AS service, (hash(i * 5) % 10000000)::BIGINT AS bytes,
            md5(i::VARCHAR) AS request_id, md5((i * 7)::VARCHAR) AS user_id
          FROM range(${n * ROWS_PER_INPUT}, ${(n + 1) * ROWS_PER_INPUT}) t(i) ORDER BY ts) TO ${sqlString(file)} (FORMAT parquet)`),
        );
        // Streamed, hashed and uploaded: no input's bytes are left in this process's buffers before the merge.
        const digest = createHash('sha256');
        await pipeline(createReadStream(file), digest);
        const id = segmentId('big', 0, '20261101', digest.digest('hex').slice(0, 20));
        const { size } = await stat(file);
        await deps.s3.send(
          new PutObjectCommand({
            Bucket: cluster.bucket,
            Key: segmentObjectKey('big', id),
            Body: createReadStream(file),
            ContentLength: size,
          }),
        );
        await cluster.meta.commitSegment({
          id,
          table: 'big',
          minTs: day,
          maxTs: day + INPUTS * ROWS_PER_INPUT,
          rows: ROWS_PER_INPUT,
          bytes: size,
          level: 0,
        });
        inputs.push(id);
      }
      scratch.closeSync();

      collectGarbage();
      const baseline = process.memoryUsage().arrayBuffers;
      let peak = baseline;
      let samples = 0;
      const sampler = setInterval(() => {
        collectGarbage();
        peak = Math.max(peak, process.memoryUsage().arrayBuffers);
        samples++;
      }, 200);
      let done: Awaited<ReturnType<MergeActivities['mergePushAndCommit']>>;
      try {
        done = await new MockActivityEnvironment({ attempt: 1 }).run(createMergeActivities(deps).mergePushAndCommit, {
          table: 'big',
          partition: '20261101',
          level: 0,
          inputs,
        });
      } finally {
        clearInterval(sampler);
      }
      expect(done.merged.rows).toBe(INPUTS * ROWS_PER_INPUT);
      expect(done.push.accepted).toBe(true);
      // The node holds exactly the object's bytes, and the manifest has the merged segment alone.
      expect(cluster.nodes[0]!.cache.holdsWhole(done.merged.id)).toBe(true);
      expect((await cluster.meta.listSegments('big')).map((s) => s.id)).toEqual([done.merged.id]);
      expect(done.merged.bytes).toBeGreaterThan(2 * PUBLISH_MEMORY_BYTES);
      expect(samples).toBeGreaterThanOrEqual(5); // sampled all along the merge, not once or never
      expect(peak - baseline).toBeLessThanOrEqual(PUBLISH_MEMORY_BYTES);
    },
  );
});

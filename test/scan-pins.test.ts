/**
 * A scan that fails on one segment while the node is still acquiring others gives every pin back:
 * a pinned segment can never be evicted, so a leaked pin would hold its disk space for good.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Readable } from 'node:stream';
import type { S3Client } from '@aws-sdk/client-s3';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { bearer } from '../services/common/auth.js';
import { MemberView } from '../services/common/member-view.js';
import { createS3Client } from '../services/common/s3-client.js';
import { MetaClient } from '../services/meta/client.js';
import { buildQueryNodeApp } from '../services/query-node/app.js';
import { Scanner } from '../services/common/scanner.js';
import { SegmentCache } from '../services/query-node/segment-cache.js';
import { SegmentMemory } from '../services/query-node/segment-memory.js';
import { SegmentSchemas } from '../services/query-node/segment-schema.js';
import { Warmer } from '../services/query-node/warmer.js';

const TOKEN = 'scan-pins-test-token-0123456789abcdef';
const CACHED = ['pins-1', 'pins-2', 'pins-3', 'pins-4', 'pins-5'];
/** In no cache and not in the bucket: its acquire fails. */
const MISSING = 'pins-missing';

describe('a scan that fails while acquiring its segments', () => {
  let dir: string;
  let s3: S3Client;
  let duckdb: DuckDBInstance;
  let cache: SegmentCache;

  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-scan-pins-'));
    s3 = createS3Client({ endpoint: inject('s3Endpoint'), credentials: inject('s3Credentials') });
    duckdb = await DuckDBInstance.create(':memory:');
    cache = await SegmentCache.open({ dir, budgetBytes: 64 * 1024 * 1024, s3, bucket: inject('s3Bucket'), duckdb });
    for (const id of CACHED) await cache.put(id, Readable.from([Buffer.alloc(1024, id)]));
  });
  afterAll(async () => {
    duckdb?.closeSync();
    s3?.destroy();
    await rm(dir, { recursive: true, force: true });
  });

  it('releases the pins of the acquires still in flight when another one fails', async () => {
    // The cached segments are held only once the missing one has failed and the failure has had
    // its turn to run: the scan is then still acquiring them.
    let failed!: () => void;
    const failure = new Promise<void>((resolve) => (failed = resolve));
    let acquired = 0;
    const slowCache = new Proxy(cache, {
      get(target, property) {
        if (property === 'acquire') {
          return async (table: string, id: string, options: { partial?: boolean; keep?: boolean }) => {
            if (id === MISSING) return await target.acquire(table, id, options).finally(failed);
            const held = await target.acquire(table, id, options);
            acquired++;
            await failure;
            await new Promise(setImmediate);
            return held;
          };
        }
        const value: unknown = Reflect.get(target, property, target);
        return typeof value === 'function' ? (value as (...args: unknown[]) => unknown).bind(target) : value;
      },
    });
    const meta = new MetaClient('http://127.0.0.1:1', TOKEN);
    const view = new MemberView({ meta, group: 'serving' });
    const memory = await SegmentMemory.open({ duckdb, budgetBytes: 0 });
    const app = buildQueryNodeApp({
      nodeId: 'pins-node',
      group: 'serving',
      token: TOKEN,
      cache: slowCache,
      memory,
      schemas: new SegmentSchemas(duckdb),
      scanner: new Scanner(duckdb),
      view,
      warmer: new Warmer({ nodeId: 'pins-node', meta, view, cache }),
      canary: () => Promise.reject(new Error('not used')),
      isRegistered: () => true,
      logger: false,
    });
    try {
      const response = await app.inject({
        method: 'POST',
        url: '/v1/scan',
        headers: bearer(TOKEN),
        payload: {
          sql: 'SELECT count(*) FROM events',
          tables: [{ name: 'events', schema: [{ name: 'ts', type: 'TIMESTAMP' }], segments: [...CACHED, MISSING] }],
        },
      });
      expect(response.statusCode).toBeGreaterThanOrEqual(500);
      expect(acquired).toBe(CACHED.length);
      expect(cache.pinnedSegments).toBe(0);
    } finally {
      await app.close();
      await memory.close();
    }
  });
});

/** `berth up --meta-database postgres://…`: the embedded cluster with meta on PostgreSQL instead of its SQLite file. */
import { existsSync } from 'node:fs';
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Endpoints } from '../cli/embedded/cluster.js';
import { berth, FREE_PORTS, startBerth } from './helpers/berth-cli.js';
import { eventNdjson } from './helpers/event-data.js';
import { createTestDatabase } from './helpers/postgres.js';

describe('berth up --meta-database', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'berth-up-pg-'));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it('keeps meta in the PostgreSQL database it is given, and no SQLite file', { timeout: 180_000 }, async () => {
    const database = await createTestDatabase();
    const up = startBerth(
      'up',
      '--data-dir',
      dataDir,
      '--vcpus',
      '1',
      '--cache-mb',
      '64',
      '--meta-database',
      database,
      ...FREE_PORTS,
    );
    try {
      await up.waitFor(/Ctrl-C stops everything/);
      const endpoints = JSON.parse(await readFile(path.join(dataDir, 'endpoints.json'), 'utf8')) as Endpoints;
      const file = path.join(dataDir, 'rows.ndjson');
      await writeFile(file, await eventNdjson(0, 1_000));
      expect((await berth('ingest', file, '--table', 'events', '--data-dir', dataDir)).stdout).toContain(
        'ingested 1,000 rows into events as 1 segment(s)',
      );
      expect(
        JSON.parse((await berth('query', 'SELECT count(*) AS n FROM events', '--json', '--data-dir', dataDir)).stdout)
          .rows,
      ).toEqual([[1_000]]);

      const client = new pg.Client({ connectionString: database });
      await client.connect();
      const segments = (await client.query<{ tbl: string; rows: string }>('SELECT tbl, rows FROM segments')).rows;
      const nodes = (await client.query<{ id: string }>('SELECT id FROM nodes')).rows;
      await client.end();
      expect(segments).toEqual([{ tbl: 'events', rows: '1000' }]);
      expect(nodes.map((n) => n.id)).toEqual(endpoints.nodes.map((n) => n.id));
      expect(existsSync(path.join(dataDir, 'meta', 'meta.sqlite'))).toBe(false);
    } finally {
      up.child.kill('SIGINT');
    }
    expect(await up.exited).toBe(0);
  });

  it('refuses anything but a PostgreSQL URL, and says so', async () => {
    const { code, stderr } = await berth('up', '--data-dir', dataDir, '--meta-database', 'meta.sqlite');
    expect(code).toBe(2);
    expect(stderr.trim()).toBe('berth: --meta-database takes a postgres://… URL, not "meta.sqlite"');
  });
});

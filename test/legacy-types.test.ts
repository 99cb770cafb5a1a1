/**
 * Tables as an earlier Berth wrote them: meta says HUGEINT, the segments hold DOUBLE (DuckDB's
 * Parquet writer has no 128-bit integer). `berth doctor` finds them and, with --repair, sets
 * meta's types to what the segments hold; a worker does the same at its start. On a real cluster:
 * meta, a query node, the coordinator and the run's S3 API.
 */
import { createHash, randomUUID } from 'node:crypto';
import { mkdir, readFile, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { PutObjectCommand, type S3Client } from '@aws-sdk/client-s3';
import { DuckDBInstance } from '@duckdb/node-api';
import type pino from 'pino';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import {
  checkLegacyTypes,
  legacyColumns,
  parquetHeldType,
  sampleSegments,
  type LegacyTypeDeps,
} from '../activities/legacy-types.js';
import { segmentId, segmentObjectKey } from '../core/identifiers.js';
import { sqlString, withConnection } from '../services/common/duckdb.js';
import { describe as describeColumns } from '../services/common/parquet-columns.js';
import { createS3Client } from '../services/common/s3-client.js';
import type { ColumnSpec } from '../services/meta/client.js';
import { berth } from './helpers/berth-cli.js';
import { startWorker } from './helpers/berth-worker.js';
import { startCluster, TOKEN, type TestCluster } from './helpers/cluster.js';

describe('the types a Parquet segment holds', () => {
  it('are DOUBLE for HUGEINT and UHUGEINT wherever they appear in a type', () => {
    expect(parquetHeldType('HUGEINT')).toBe('DOUBLE');
    expect(parquetHeldType('UHUGEINT')).toBe('DOUBLE');
    expect(parquetHeldType('STRUCT(id HUGEINT, "HUGEINT" VARCHAR)')).toBe('STRUCT(id DOUBLE, "HUGEINT" VARCHAR)');
    expect(parquetHeldType('HUGEINT[]')).toBe('DOUBLE[]');
    expect(parquetHeldType('MAP(VARCHAR, STRUCT(a UHUGEINT[]))')).toBe('MAP(VARCHAR, STRUCT(a DOUBLE[]))');
    for (const type of ['BIGINT', 'UBIGINT', 'DECIMAL(38,0)', 'DOUBLE', 'STRUCT(hugeint_count BIGINT)'])
      expect(parquetHeldType(type)).toBe(type);
    expect(
      legacyColumns({
        name: 't',
        timestampColumn: 'ts',
        incarnation: 1,
        columns: [
          { name: 'ts', type: 'TIMESTAMP' },
          { name: 'x', type: 'HUGEINT' },
        ],
      }),
    ).toEqual([{ name: 'x', declared: 'HUGEINT', held: 'DOUBLE' }]);
  });

  it('are checked on the newest segments and a few spread evenly over the rest, the oldest included', () => {
    const ids = Array.from({ length: 100 }, (_, i) => i);
    expect(sampleSegments(ids, 4, 4)).toEqual([0, 1, 2, 3, 28, 52, 75, 99]);
    expect(sampleSegments(ids.slice(0, 7), 4, 4)).toEqual(ids.slice(0, 7));
    expect(sampleSegments([], 4, 4)).toEqual([]);
  });
});

describe('tables an earlier Berth typed HUGEINT', () => {
  let cluster: TestCluster;
  let s3: S3Client;
  let duckdb: DuckDBInstance;
  let deps: LegacyTypeDeps;
  const day = Date.UTC(2026, 10, 1);

  /**
   * Makes a table as the earlier release did: meta takes DuckDB's types of `select` (HUGEINT),
   * and each segment is `select` written by DuckDB's Parquet writer (DOUBLE), PUT under its key
   * and committed. `declared` overrides the types meta takes.
   */
  async function legacyTable(name: string, selects: string[], declared?: ColumnSpec[]): Promise<ColumnSpec[]> {
    const columns = declared ?? (await withConnection(duckdb, (c) => describeColumns(c, `(${selects[0]!})`)));
    await cluster.meta.ensureTable({ name, timestampColumn: 'ts', columns });
    for (const [i, select] of selects.entries()) {
      const file = path.join(cluster.dir, `${name}-${i}.parquet`);
      await withConnection(duckdb, (c) => c.run(`COPY (${select}) TO ${sqlString(file)} (FORMAT parquet)`));
      const bytes = await readFile(file);
      const id = segmentId(name, 0, '20261101', createHash('sha256').update(bytes).digest('hex').slice(0, 20));
      await s3.send(new PutObjectCommand({ Bucket: cluster.bucket, Key: segmentObjectKey(name, id), Body: bytes }));
      const rows = Number(
        (await withConnection(duckdb, (c) => c.runAndReadAll(`SELECT count(*) FROM (${select})`))).getRows()[0]![0],
      );
      await cluster.meta.commitSegment({
        id,
        table: name,
        minTs: day + i,
        maxTs: day + i,
        rows,
        bytes: bytes.length,
        level: 0,
      });
    }
    return columns;
  }

  async function answer(sql: string) {
    const { status, body } = await cluster.query(sql);
    expect(status, body.message).toBe(200);
    return { types: body.types, rows: body.rows };
  }

  /** A data dir as `berth up` leaves it, naming this test's cluster, for `berth doctor`. */
  async function dataDir(): Promise<string> {
    const dir = path.join(cluster.dir, 'berth-data');
    await mkdir(dir, { recursive: true });
    const endpoints = {
      meta: cluster.metaUrl,
      s3: cluster.s3.endpoint,
      bucket: cluster.bucket,
      coordinator: cluster.coordinator.url,
    };
    await writeFile(path.join(dir, 'endpoints.json'), JSON.stringify(endpoints));
    await writeFile(path.join(dir, 'token'), `${TOKEN}\n`);
    const { accessKeyId: accessKey, secretAccessKey: secretKey } = cluster.s3.credentials;
    await writeFile(
      path.join(dir, 's3-identities.json'),
      JSON.stringify({ identities: [{ name: 'berth', credentials: [{ accessKey, secretKey }], actions: ['Admin'] }] }),
    );
    return dir;
  }

  beforeAll(async () => {
    cluster = await startCluster({ vcpus: [2] });
    s3 = createS3Client(cluster.s3);
    duckdb = await DuckDBInstance.create(':memory:');
    deps = { s3, bucket: cluster.bucket, meta: cluster.meta, duckdb, workDir: path.join(cluster.dir, 'legacy') };
  });
  afterAll(async () => {
    duckdb?.closeSync();
    s3?.destroy();
    await cluster?.close();
  });

  it('`berth doctor` says what it found, and with --repair sets the column to DOUBLE: queries answer exactly and ingests pass again', async () => {
    const columns = await legacyTable('legacy', [
      `SELECT TIMESTAMP '2026-11-01' AS ts, 3::HUGEINT AS x UNION ALL SELECT TIMESTAMP '2026-11-01', -1::HUGEINT`,
    ]);
    expect(columns).toEqual([
      { name: 'ts', type: 'TIMESTAMP' },
      { name: 'x', type: 'HUGEINT' },
    ]);
    const batch = `${JSON.stringify({ ts: '2026-11-02T00:00:00Z', x: 5 })}\n`;
    expect((await cluster.ingest('legacy', batch)).status).not.toBe(200); // refused until repaired
    const before = (await cluster.meta.tableVersion('legacy'))!;
    const dir = await dataDir();

    const found = await berth('doctor', '--data-dir', dir);
    expect(found.code, found.stderr).toBe(1);
    expect(found.stdout).toContain(
      'table legacy: column x is HUGEINT in meta but its segments hold DOUBLE (written by an earlier Berth); `berth doctor --repair` sets it to DOUBLE',
    );
    expect(found.stdout).toContain('checked the Parquet footers of 1 of its 1 segment;');
    expect((await cluster.meta.findTable('legacy'))!.columns).toEqual(columns); // looking changes nothing

    const repaired = await berth('doctor', '--repair', '--data-dir', dir);
    expect(repaired.code, repaired.stderr).toBe(0);
    expect(repaired.stdout).toContain(
      'table legacy: column x is HUGEINT in meta but its segments hold DOUBLE (written by an earlier Berth); set to DOUBLE',
    );
    expect(repaired.stdout).toContain('values past 2^53 were already rounded when they were written');
    expect((await cluster.meta.findTable('legacy'))!.columns).toEqual([
      { name: 'ts', type: 'TIMESTAMP' },
      { name: 'x', type: 'DOUBLE' },
    ]);
    const after = (await cluster.meta.tableVersion('legacy'))!;
    expect(after.schema).not.toBe(before.schema); // the coordinators' catalogs and plans refresh

    expect(await answer('SELECT x FROM legacy ORDER BY x')).toEqual({ types: ['DOUBLE'], rows: [[-1], [3]] });
    const ingested = await cluster.ingest('legacy', batch);
    expect(ingested.status, ingested.body.message).toBe(200);
    expect(await answer('SELECT x FROM legacy ORDER BY x')).toEqual({ types: ['DOUBLE'], rows: [[-1], [3], [5]] });

    const again = await berth('doctor', '--data-dir', dir);
    expect(again.code, again.stdout).toBe(0);
    expect(again.stdout).toContain('no table has a type its segments cannot hold');
  });

  it('repairs HUGEINT and UHUGEINT nested in structs, lists and maps, after reading the footers of a sample of the segments', async () => {
    // A tail shorter than the footer: the rest of the footer is fetched by a second GET.
    const select = (id: number) =>
      `SELECT TIMESTAMP '2026-11-01' AS ts, {'id': ${id}::HUGEINT, 'name': 'a'} AS s, [${id}::HUGEINT, -2] AS l, ` +
      `MAP {'k': ${id}::UHUGEINT} AS m, ${id}::UHUGEINT AS u`;
    const columns = await legacyTable('nested', [select(1), select(2), select(3), select(4)]);
    expect(columns.map((c) => c.type)).toEqual([
      'TIMESTAMP',
      'STRUCT(id HUGEINT, "name" VARCHAR)',
      'HUGEINT[]',
      'MAP(VARCHAR, UHUGEINT)',
      'UHUGEINT',
    ]);

    const findings = await checkLegacyTypes(
      { ...deps, sample: { newest: 1, spread: 2 }, tailBytes: 64 },
      { repair: true },
    );
    const finding = findings.find((f) => f.table === 'nested')!;
    expect(finding).toMatchObject({ outcome: 'repaired', checked: 3, segments: 4 });
    expect(finding.message.split('\n')).toEqual([
      'table nested: column s is STRUCT(id HUGEINT, "name" VARCHAR) in meta but its segments hold STRUCT(id DOUBLE, "name" VARCHAR) (written by an earlier Berth); set to STRUCT(id DOUBLE, "name" VARCHAR)',
      'table nested: column l is HUGEINT[] in meta but its segments hold DOUBLE[] (written by an earlier Berth); set to DOUBLE[]',
      'table nested: column m is MAP(VARCHAR, UHUGEINT) in meta but its segments hold MAP(VARCHAR, DOUBLE) (written by an earlier Berth); set to MAP(VARCHAR, DOUBLE)',
      'table nested: column u is UHUGEINT in meta but its segments hold DOUBLE (written by an earlier Berth); set to DOUBLE',
      expect.stringMatching(/^ {2}checked the Parquet footers of 3 of its 4 segments; DOUBLE is what the files hold/),
    ]);
    expect((await cluster.meta.findTable('nested'))!.columns.map((c) => c.type)).toEqual([
      'TIMESTAMP',
      'STRUCT(id DOUBLE, "name" VARCHAR)',
      'DOUBLE[]',
      'MAP(VARCHAR, DOUBLE)',
      'DOUBLE',
    ]);
    expect(await answer(`SELECT s.id AS id, l, m['k'] AS k, u FROM nested ORDER BY u`)).toEqual({
      types: ['DOUBLE', 'DOUBLE[]', 'DOUBLE', 'DOUBLE'],
      rows: [1, 2, 3, 4].map((n) => [n, [n, -2], n, n]),
    });
  });

  it('leaves a table whose segments hold something else than DOUBLE as it is, and says which segment and why', async () => {
    const declared = [
      { name: 'ts', type: 'TIMESTAMP' },
      { name: 'x', type: 'HUGEINT' },
    ];
    await legacyTable('odd', [`SELECT TIMESTAMP '2026-11-01' AS ts, '3' AS x`], declared);
    const finding = (await checkLegacyTypes(deps, { repair: true })).find((f) => f.table === 'odd')!;
    expect(finding.outcome).toBe('refused');
    expect(finding.message).toMatch(
      /^table odd: column x is HUGEINT in meta, a type Parquet cannot hold, but segment odd-l0-20261101-\w+ does not hold DOUBLE .*\(column "x" is VARCHAR, declared DOUBLE\); left as it is$/,
    );
    expect((await cluster.meta.findTable('odd'))!.columns).toEqual(declared);
  });

  it('is repaired by a worker at its start, which logs what it found and runs on', async () => {
    await legacyTable('at_start', [`SELECT TIMESTAMP '2026-11-01' AS ts, 7::HUGEINT AS x`]);
    const logged: string[] = [];
    const log = {
      info: (_fields: object, message: string) => logged.push(message),
      warn: (_fields: object, message: string) => logged.push(message),
    } as unknown as Pick<pino.Logger, 'info' | 'warn'>;
    const worker = await startWorker(cluster, `legacy-${randomUUID()}`, { log });
    try {
      await expect
        .poll(async () => (await cluster.meta.findTable('at_start'))!.columns.map((c) => c.type), { timeout: 20_000 })
        .toEqual(['TIMESTAMP', 'DOUBLE']);
      await expect
        .poll(() => logged.join('\n'))
        .toContain(
          'table at_start: column x is HUGEINT in meta but its segments hold DOUBLE (written by an earlier Berth); set to DOUBLE',
        );
      // The table it could not repair is said too, and the worker runs on.
      await expect.poll(() => logged.join('\n')).toContain('table odd: column x is HUGEINT in meta');
      expect(worker.worker.workers.merge.getState()).toBe('RUNNING');
    } finally {
      await worker.stop();
    }
    expect(await answer('SELECT x FROM at_start')).toEqual({ types: ['DOUBLE'], rows: [[7]] });
  });
});

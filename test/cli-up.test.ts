import { existsSync, readdirSync, readFileSync } from 'node:fs';
import { mkdtemp, readFile, rm, stat, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { Connection } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import type { Endpoints } from '../cli/embedded/cluster.js';
import { berth, FREE_PORTS, startBerth } from './helpers/berth-cli.js';
import { psql } from './helpers/pg-clients.js';
import { eventNdjson, eventRowsSql } from './helpers/event-data.js';

/** Every process below `pid`, from /proc. */
function descendants(pid: number): number[] {
  const parents = new Map<number, number>();
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue;
    try {
      const stat = readFileSync(`/proc/${entry}/stat`, 'utf8');
      parents.set(Number(entry), Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[1]));
    } catch {
      // gone meanwhile
    }
  }
  const found: number[] = [];
  const visit = (parent: number) => {
    for (const [child, ppid] of parents) {
      if (ppid !== parent) continue;
      found.push(child);
      visit(child);
    }
  };
  visit(pid);
  return found;
}
const read = (pid: number, file: string) => {
  try {
    return readFileSync(`/proc/${pid}/${file}`, 'utf8').replaceAll('\0', ' ');
  } catch {
    return '';
  }
};
const environ = (pid: number) => read(pid, 'environ');
const cmdline = (pid: number) => read(pid, 'cmdline');
const alive = (pid: number) => {
  const state = read(pid, 'stat');
  return state !== '' && !/^\d+ \(.*\) Z/.test(state);
};

async function runUntilReady(dataDir: string) {
  const up = startBerth('up', '--data-dir', dataDir, '--vcpus', '2,1', '--cache-mb', '64', ...FREE_PORTS);
  await up.waitFor(/Ctrl-C stops everything/);
  const endpoints = JSON.parse(await readFile(path.join(dataDir, 'endpoints.json'), 'utf8')) as Endpoints;
  return { up, endpoints };
}

describe('berth up and the everyday commands', () => {
  let dataDir: string;
  beforeAll(async () => {
    dataDir = await mkdtemp(path.join(os.tmpdir(), 'berth-up-'));
  });
  afterAll(() => rm(dataDir, { recursive: true, force: true }));

  it(
    'runs the cluster, ingests and queries through the CLI, stops on Ctrl-C and resumes its data',
    { timeout: 300_000 },
    async () => {
      const first = await runUntilReady(dataDir);
      try {
        expect(first.up.output()).toContain(first.endpoints.coordinator);
        expect(first.endpoints.nodes.map((n) => n.vcpus)).toEqual([2, 1]);
        expect(
          existsSync(path.join(dataDir, 'meta', 'meta.sqlite')),
          'meta stays on SQLite without --meta-database',
        ).toBe(true);
        const connection = await Connection.connect({ address: first.endpoints.temporal });
        const { namespaceInfo } = await connection.workflowService.describeNamespace({
          namespace: first.endpoints.temporalNamespace,
        });
        expect(namespaceInfo?.name).toBe('default');
        await connection.close();
        expect((await fetch(first.endpoints.temporalUi)).status).toBe(200);
        expect(await (await fetch(first.endpoints.workerMetrics)).text()).toMatch(/^temporal_num_pollers\{/m);

        const file = path.join(dataDir, 'rows.ndjson');
        await writeFile(file, await eventNdjson(0, 3_000));
        const ingested = await berth(
          'ingest',
          file,
          '--table',
          'events',
          '--batch-rows',
          '1000',
          '--data-dir',
          dataDir,
        );
        expect(ingested.stderr).toBe('');
        expect(ingested.stdout).toContain('ingested 3,000 rows into events as 3 segment(s)');

        // The same rows as gzipped CSV and as Parquet: read by the command's own DuckDB, sent in batches.
        const duckdb = await DuckDBInstance.create(':memory:');
        const writer = await duckdb.connect();
        const files = { csv: path.join(dataDir, 'rows.csv.gz'), parquet: path.join(dataDir, 'rows.parquet') };
        await writer.run(`COPY (${eventRowsSql(0, 3_000)}) TO '${files.csv}' (FORMAT csv, HEADER, COMPRESSION gzip)`);
        await writer.run(`COPY (${eventRowsSql(0, 3_000)}) TO '${files.parquet}' (FORMAT parquet)`);
        writer.closeSync();
        duckdb.closeSync();
        const summary = async (table: string) =>
          (
            JSON.parse(
              (
                await berth(
                  'query',
                  `SELECT level, region, count(*) AS n, sum(bytes) AS bytes, max(ts) AS last FROM ${table} GROUP BY ALL ORDER BY ALL`,
                  '--json',
                  '--data-dir',
                  dataDir,
                )
              ).stdout,
            ) as { rows: unknown[] }
          ).rows;
        for (const [format, table] of [
          ['csv', 'events_csv'],
          ['parquet', 'events_parquet'],
        ] as const) {
          const sent = await berth(
            'ingest',
            files[format],
            '--table',
            table,
            '--batch-rows',
            '1000',
            '--data-dir',
            dataDir,
          );
          expect(sent.stdout, sent.stderr).toMatch(
            new RegExp(`ingested 3,000 rows into ${table} as [2-4] segment\\(s\\)`),
          );
          expect(await summary(table), format).toEqual(await summary('events'));
        }

        const queried = await berth(
          'query',
          'SELECT level, count(*) AS n FROM events GROUP BY level ORDER BY level',
          '--json',
          '--data-dir',
          dataDir,
        );
        const result = JSON.parse(queried.stdout) as {
          columns: string[];
          rows: [string, number][];
          stats: { route: string; cacheHits: number };
        };
        expect(result.columns).toEqual(['level', 'n']);
        expect(result.rows.reduce((sum, [, n]) => sum + n, 0)).toBe(3_000);
        expect(result.stats.route).toBe('aggregate');
        const human = await berth('query', 'SELECT count(*) AS n FROM events', '--data-dir', dataDir);
        expect(human.stdout).toMatch(/^\s*n\n3000\n/);
        expect(human.stdout).toMatch(/route aggregate/);
        // endpoints.json's PostgreSQL URL, with the data dir's token as the password, as psql is used.
        expect(first.endpoints.postgres).toMatch(/^postgres:\/\/127\.0\.0\.1:\d+\/berth$/);
        const clusterToken = (await readFile(path.join(dataDir, 'token'), 'utf8')).trim();
        const viaPsql = await psql(first.endpoints.postgres, clusterToken, [
          '-At',
          '-c',
          'SELECT count(*) FROM events',
        ]);
        expect(viaPsql.stderr).toBe('');
        expect(viaPsql.stdout).toBe('3000\n');
        const streamed = await berth(
          'query',
          'SELECT level FROM events ORDER BY ts',
          '--ndjson',
          '--data-dir',
          dataDir,
        );
        const lines = streamed.stdout
          .trim()
          .split('\n')
          .map((line) => JSON.parse(line) as unknown);
        expect(lines[0]).toEqual({ columns: ['level'], types: ['VARCHAR'] });
        expect(lines).toHaveLength(1 + 3_000 + 1);
        expect(lines.at(-1)).toMatchObject({ stats: { segments: { total: 3 } } });
        const cutShort = await berth(
          'query',
          "SELECT error('no such luck') FROM events",
          '--ndjson',
          '--data-dir',
          dataDir,
        );
        expect(cutShort.code).not.toBe(0);
        expect(cutShort.stderr).toMatch(/no such luck/);

        // A row is a line up to \n and nowhere else: U+2028 and U+2029 stay inside its strings, both ways.
        const notes = path.join(dataDir, 'notes.ndjson');
        const note = 'line\u2028and\u2029paragraph';
        await writeFile(notes, `${JSON.stringify({ ts: '2026-11-01T00:00:00Z', note })}\n`);
        expect((await berth('ingest', notes, '--table', 'notes', '--data-dir', dataDir)).stdout).toContain(
          'ingested 1 rows into notes',
        );
        const noted = await berth('query', 'SELECT note FROM notes', '--ndjson', '--data-dir', dataDir);
        expect(JSON.parse(noted.stdout.split('\n')[1]!)).toEqual([note]);

        const kept = await berth('table', 'set', 'notes', '--retention', '30d', '--data-dir', dataDir);
        expect(kept.stdout).toContain('notes: rows kept 30d');
        const badPeriod = await berth('table', 'set', 'notes', '--retention', '30 days', '--data-dir', dataDir);
        expect(badPeriod.code).toBe(2);
        expect(badPeriod.stderr).toMatch(/--retention: "30 days" is not a period such as 30d/);
        const shown = JSON.parse(
          (await berth('table', 'show', 'notes', '--json', '--data-dir', dataDir)).stdout,
        ) as Record<string, unknown>;
        expect(shown).toMatchObject({
          name: 'notes',
          columns: [
            { name: 'ts', type: 'TIMESTAMP' },
            { name: 'note', type: 'VARCHAR' },
          ],
          retentionMs: 30 * 86_400_000,
          segments: 1,
          rows: 1,
          oldest: Date.parse('2026-11-01T00:00:00Z'),
          newest: Date.parse('2026-11-01T00:00:00Z'),
        });
        expect((await berth('table', 'show', 'notes', '--data-dir', dataDir)).stdout).toMatch(
          /^notes: schema [0-9a-f]{16}, timestamps in "ts", retention 30d\n {2}1 segments, 1 rows/,
        );
        expect((await berth('table', 'list', '--data-dir', dataDir)).stdout).toMatch(
          /\bevents +\d+ +3\b[^]*\n.*\bnotes\b.*30d/,
        );
        const noTable = await berth('table', 'set', 'nowhere', '--retention', 'off', '--data-dir', dataDir);
        expect(noTable.stderr).toMatch(/table "nowhere" does not exist/);

        // Drop asks for confirmation, then hides the table at once and waits for its workflow.
        const unconfirmed = await berth('table', 'drop', 'notes', '--data-dir', dataDir);
        expect(unconfirmed.code).toBe(2);
        expect(unconfirmed.stderr).toMatch(/confirm with --yes/);
        const dropped = await berth('table', 'drop', 'notes', '--yes', '--data-dir', dataDir);
        expect(dropped.stdout).toContain('notes: dropped; retiring 1 segments (1 rows)');
        expect(dropped.stdout).toMatch(/notes: 1 segments \(.+\) retired/);
        expect(dropped.stderr).toMatch(/\/namespaces\/default\/workflows\/drop-notes-1\n/);
        expect((await berth('query', 'SELECT count(*) FROM notes', '--data-dir', dataDir)).stderr).toMatch(
          /unknown table "notes"/,
        );
        expect((await berth('table', 'list', '--data-dir', dataDir)).stdout).not.toMatch(/\bnotes\b/);

        // A table without a timestamp column: a dimension table.
        const owners = path.join(dataDir, 'owners.ndjson');
        await writeFile(owners, '{"service":"api","owner":"platform"}\n{"service":"web","owner":"frontend"}\n');
        expect(
          (await berth('ingest', owners, '--table', 'owners', '--no-timestamp', '--data-dir', dataDir)).stdout,
        ).toContain('ingested 2 rows into owners');
        expect((await berth('table', 'show', 'owners', '--data-dir', dataDir)).stdout).toMatch(
          /^owners: schema [0-9a-f]{16}, no timestamp column, retention kept for good\n {2}1 segments, 2 rows, \d+ bytes; rows from - to -/,
        );

        // Delete by predicate: refused with the binder's reason, or done and waited for.
        const unknownColumn = await berth('delete', '--table', 'owners', '--where', 'team = 1', '--data-dir', dataDir);
        expect(unknownColumn.code).toBe(2);
        expect(unknownColumn.stderr).toMatch(/"team"/);
        const deleted = await berth(
          'delete',
          '--table',
          'owners',
          '--where',
          "owner = 'frontend'",
          '--data-dir',
          dataDir,
        );
        expect(deleted.stdout).toContain('owners: 1 rows removed; 1 segments rewritten, 0 retired whole');
        expect(deleted.stderr).toMatch(/\/namespaces\/default\/workflows\/delete-owners-1\n/);
        const left = await berth('query', 'SELECT service, owner FROM owners', '--json', '--data-dir', dataDir);
        expect((JSON.parse(left.stdout) as { rows: unknown[] }).rows).toEqual([['api', 'platform']]);

        const nodes = JSON.parse((await berth('nodes', '--json', '--data-dir', dataDir)).stdout) as {
          id: string;
          weight: number;
          share: number;
          alive: boolean;
        }[];
        expect(nodes.map((n) => [n.weight, n.alive])).toEqual(
          expect.arrayContaining([
            [2, true],
            [1, true],
          ]),
        );
        expect(nodes.reduce((sum, n) => sum + n.share, 0)).toBeCloseTo(1);

        const merged = await berth('merge', '--table', 'events', '--json', '--data-dir', dataDir);
        expect(JSON.parse(merged.stdout)).toEqual({
          table: 'events',
          partitions: [{ partition: '20261101', outcome: 'merged' }],
        });
        expect(merged.stderr).toMatch(
          /merging events: http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows\/merge-events-now-/,
        );
        const afterMerge = JSON.parse(
          (await berth('query', 'SELECT count(*) AS n FROM events', '--json', '--data-dir', dataDir)).stdout,
        ) as { rows: number[][]; stats: { segments: { total: number } } };
        expect(afterMerge.rows).toEqual([[3_000]]);
        expect(afterMerge.stats.segments.total).toBe(1);

        const parked = JSON.parse((await berth('pool', 'status', 'heavy', '--json', '--data-dir', dataDir)).stdout) as {
          phase: string;
          target: number;
        };
        expect(parked).toMatchObject({ phase: 'parked', target: 0 });
        const launched = await berth('pool', 'launch', 'heavy', '--target', '1', '--data-dir', dataDir);
        expect(launched.stdout).toMatch(/^heavy: target 2 accepted \(workflow heavy-pool-heavy\)/);
        const rejected = await berth('pool', 'launch', 'heavy', '--target', '0', '--data-dir', dataDir);
        expect(rejected.code).not.toBe(0);
        expect(rejected.stderr).toMatch(/target/);
        // The memory class steps by one backend, which the local driver starts with its larger final-stage limit.
        const memory = await berth('pool', 'launch', 'heavy-memory', '--target', '3', '--data-dir', dataDir);
        expect(memory.stdout).toMatch(/^heavy-memory: target 1 accepted \(workflow heavy-pool-heavy-memory\)/);
        await expect
          .poll(
            () =>
              descendants(first.up.child.pid!).filter((pid) => environ(pid).includes('BERTH_NODE_GROUP=heavy-memory')),
            {
              timeout: 30_000,
            },
          )
          .toHaveLength(1);
        const [memoryBackend] = descendants(first.up.child.pid!).filter((pid) =>
          environ(pid).includes('BERTH_NODE_GROUP=heavy-memory'),
        );
        expect(environ(memoryBackend!)).toContain('BERTH_FINAL_STAGE_MEMORY_LIMIT=50%');
        // Once it is up (its DuckDB open), it yields this machine's cores to the serving tier:
        // every thread of it runs at nice 10.
        const status = async () =>
          JSON.parse((await berth('pool', 'status', 'heavy-memory', '--json', '--data-dir', dataDir)).stdout) as {
            aliveBackends: number;
          };
        await expect.poll(async () => (await status()).aliveBackends, { timeout: 60_000 }).toBe(1);
        const niceOf = (stat: string) => Number(stat.slice(stat.lastIndexOf(')') + 2).split(' ')[16]);
        const threads = readdirSync(`/proc/${memoryBackend}/task`);
        expect(threads.length).toBeGreaterThan(4);
        expect(new Set(threads.map((t) => niceOf(read(memoryBackend!, `task/${t}/stat`))))).toEqual(new Set([10]));
        const servingNode = descendants(first.up.child.pid!).find((pid) =>
          environ(pid).includes(`BERTH_NODE_CACHE_DIR=${path.join(dataDir, 'nodes', 'node-0')}`),
        )!;
        expect(niceOf(read(servingNode, 'stat'))).toBe(0);
        const unknown = await berth('pool', 'status', 'nope', '--data-dir', dataDir);
        expect(unknown.stderr.trim()).toBe(
          'berth: unknown group "nope": this controller scales "heavy", "heavy-memory"',
        );

        const bad = await berth('query', 'SELECT * FROM nowhere', '--data-dir', dataDir);
        expect(bad.code).not.toBe(0);
        expect(bad.stderr.trim()).toBe('berth: unknown table "nowhere"');

        // A child that dies is restarted, where it listened before, and says so.
        const node = first.endpoints.nodes[0]!;
        const nodePid = descendants(first.up.child.pid!).find((pid) =>
          environ(pid).includes(`BERTH_NODE_CACHE_DIR=${path.join(dataDir, 'nodes', 'node-0')}`),
        )!;
        process.kill(nodePid, 'SIGKILL');
        await first.up.waitFor(/query-node-0 exited \(signal SIGKILL\); restarting it in 1 s/);
        await first.up.waitFor(new RegExp(`query-node-0 restarted at ${node.url}`));
        const back = JSON.parse(
          (await berth('query', 'SELECT count(*) AS n FROM events', '--json', '--data-dir', dataDir)).stdout,
        ) as { rows: number[][] };
        expect(back.rows).toEqual([[3_000]]);

        // So are its own servers. While SeaweedFS is down, ingest is a 503 naming S3 and commits nothing.
        const token = (await readFile(path.join(dataDir, 'token'), 'utf8')).trim();
        const ingest = (body: Uint8Array) =>
          fetch(`${first.endpoints.coordinator}/v1/tables/events/rows`, {
            method: 'POST',
            headers: { 'content-type': 'application/x-ndjson', authorization: `Bearer ${token}` },
            body,
          }).then(async (r) => ({ status: r.status, body: (await r.json()) as { error?: string; message?: string } }));
        const serverPid = (pattern: RegExp) =>
          descendants(first.up.child.pid!).find((pid) => pattern.test(cmdline(pid)) && !/tether/.test(cmdline(pid)))!;
        process.kill(serverPid(new RegExp(`mini .*-dir=${path.join(dataDir, 'seaweedfs')}`)), 'SIGKILL');
        const whileDown = await ingest(await eventNdjson(3_000, 3_010));
        expect(whileDown.status, whileDown.body.message).toBe(503);
        expect(whileDown.body).toMatchObject({ error: 's3_unavailable', message: expect.stringMatching(/^S3 /) });
        await first.up.waitFor(/s3 exited \(code 137\); restarting it in 1 s/);
        await first.up.waitFor(/s3 restarted/);
        expect((await ingest(await eventNdjson(3_000, 3_010))).status).toBe(200);

        process.kill(serverPid(/server start-dev/), 'SIGKILL');
        await first.up.waitFor(/temporal exited \(code 137\); restarting it in 1 s/);
        await first.up.waitFor(/temporal restarted/);
        // Its history is kept, and the worker finds it again: a merge runs as a workflow.
        const remerged = await berth('merge', '--table', 'events', '--json', '--data-dir', dataDir);
        expect(remerged.code, remerged.stderr).toBe(0);
        expect(JSON.parse(remerged.stdout)).toMatchObject({ table: 'events' });
        expect(remerged.stderr).toMatch(/merging events: http:\/\/127\.0\.0\.1:\d+\/namespaces\/default\/workflows\//);
        const counted = JSON.parse(
          (await berth('query', 'SELECT count(*) AS n FROM events', '--json', '--data-dir', dataDir)).stdout,
        ) as { rows: number[][] };
        expect(counted.rows, 'every acknowledged row once, none of the refused batch').toEqual([[3_010]]);
      } finally {
        first.up.child.kill('SIGINT');
      }
      expect(await first.up.exited).toBe(0);
      expect(first.up.output()).toContain('stopped');
      // Its state is for its user only.
      expect((await stat(path.join(dataDir, 'token'))).mode & 0o077).toBe(0);
      expect((await stat(path.join(dataDir, 'meta'))).mode & 0o077).toBe(0);
      expect((await stat(path.join(dataDir, 'meta', 'meta.sqlite'))).mode & 0o077).toBe(0);

      const second = await runUntilReady(dataDir);
      try {
        expect(second.endpoints.nodes.map((n) => n.id)).toEqual(first.endpoints.nodes.map((n) => n.id));
        const again = JSON.parse(
          (await berth('query', 'SELECT count(*) AS n FROM events', '--json', '--data-dir', dataDir)).stdout,
        ) as { rows: number[][] };
        expect(again.rows).toEqual([[3_010]]);
      } finally {
        // No child outlives `berth up`, even one killed without a chance to clean up.
        const children = descendants(second.up.child.pid!);
        expect(children.length).toBeGreaterThanOrEqual(7);
        second.up.child.kill('SIGKILL');
        await second.up.exited;
        for (let waited = 0; children.some(alive) && waited < 30_000; waited += 200)
          await new Promise((resolve) => setTimeout(resolve, 200));
        expect(children.filter(alive).map((pid) => `${pid}: ${cmdline(pid)}`)).toEqual([]);
      }
    },
  );

  it('says where to start a cluster when none runs on the data dir', async () => {
    const { code, stderr } = await berth('query', 'SELECT 1', '--data-dir', path.join(dataDir, 'nothing-here'));
    expect(code).toBe(2);
    expect(stderr).toMatch(/no cluster found in .*nothing-here: start one with `berth up/);
  });
});

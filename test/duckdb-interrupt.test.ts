/**
 * A cancel that reaches a query while it is being prepared: DuckDB forgets an interrupt that comes
 * before its query starts, so one interrupt there let the query run to its end (a psql Ctrl-C
 * during a final stage's prepare left the coordinator busy for the whole query). interruptOnAbort
 * interrupts again until the step is over.
 */
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { interruptOnAbort } from '../services/common/duckdb.js';

/** Seconds of work for DuckDB: a count over a three-way cross join. */
const LONG = 'SELECT count(*) FROM t a, t b, t c WHERE a.x + b.x > c.x';

describe('interrupting a DuckDB query on abort', () => {
  let instance: DuckDBInstance;
  let c: DuckDBConnection;

  beforeAll(async () => {
    instance = await DuckDBInstance.create(':memory:', { threads: '1' });
    c = await instance.connect();
    await c.run('CREATE TABLE t AS SELECT i AS x FROM range(1500) r(i)');
  });
  afterAll(() => {
    c.closeSync();
    instance.closeSync();
  });

  it('stops a query whose abort came while it was being prepared', async () => {
    const stop = new AbortController();
    const stopInterrupting = interruptOnAbort(c, stop.signal);
    try {
      const prepared = await c.prepare(LONG);
      stop.abort(); // after the prepare, before the query starts: a lone interrupt is forgotten here
      const started = performance.now();
      await expect(prepared.stream().then((result) => result.fetchChunk())).rejects.toThrow(/interrupt/i);
      expect(performance.now() - started).toBeLessThan(30_000); // the query alone takes several seconds
    } finally {
      stopInterrupting();
    }
  }, 120_000);

  it('stops a query started under a signal already aborted, and leaves the connection usable after', async () => {
    const stopInterrupting = interruptOnAbort(c, AbortSignal.abort());
    try {
      await expect(c.run(LONG)).rejects.toThrow(/interrupt/i);
    } finally {
      stopInterrupting();
    }
    expect((await c.runAndReadAll('SELECT 42 AS x')).getRows()).toEqual([[42]]);
  }, 120_000);
});

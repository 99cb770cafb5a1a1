/**
 * The planner binds queries on connections it keeps, each holding empty tables of one set of
 * schemas: a kept connection must bind exactly as a fresh one over the same tables would.
 */
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { SchemaConnections, type EmptyTable } from '../services/coordinator/planning/schema-connections.js';

const describeOn = (connections: SchemaConnections, tables: EmptyTable[], sql: string) =>
  connections.use(tables, async (c) =>
    (await c.runAndReadAll(`DESCRIBE ${sql}`)).getRows().map((r) => `${String(r[0])} ${String(r[1])}`),
  );

describe('connections kept for binding', () => {
  let duckdb: DuckDBInstance;
  let connections: SchemaConnections;
  const events: EmptyTable = {
    name: 'events',
    columns: [
      { name: 'ts', type: 'TIMESTAMP' },
      { name: 'n', type: 'BIGINT' },
    ],
  };
  const inputs: EmptyTable = { name: '__in0', columns: [{ name: 'n', type: 'HUGEINT' }] };

  beforeAll(async () => {
    duckdb = await DuckDBInstance.create(':memory:');
    connections = new SchemaConnections(duckdb);
  });
  afterAll(() => {
    connections.close();
    duckdb.closeSync();
  });

  it('binds over exactly the tables asked for, whichever were asked for before', async () => {
    expect(await describeOn(connections, [events], 'SELECT sum(n) AS s FROM events')).toEqual(['s HUGEINT']);
    expect(await describeOn(connections, [inputs], 'SELECT sum(n) AS s FROM __in0')).toEqual(['s HUGEINT']);
    // The kept connections: neither sees the other's table.
    await expect(describeOn(connections, [inputs], 'SELECT * FROM events')).rejects.toThrow(/events/);
    await expect(describeOn(connections, [events], 'SELECT * FROM __in0')).rejects.toThrow(/__in0/);
    // Nor a table of the same name under another schema (a column added).
    const widened = { ...events, columns: [...events.columns, { name: 'status', type: 'VARCHAR' }] };
    expect(await describeOn(connections, [widened], 'SELECT status FROM events')).toEqual(['status VARCHAR']);
    await expect(describeOn(connections, [events], 'SELECT status FROM events')).rejects.toThrow(/status/);
  });

  it('binds after a failed bind on the same connection, and in parallel on others', async () => {
    await expect(describeOn(connections, [events], 'SELECT nope FROM events')).rejects.toThrow(/nope/);
    const answers = await Promise.all(
      Array.from({ length: 20 }, (_, i) => describeOn(connections, [events], `SELECT n + ${i} AS k${i} FROM events`)),
    );
    expect(answers).toEqual(Array.from({ length: 20 }, (_, i) => [`k${i} BIGINT`]));
  });
});

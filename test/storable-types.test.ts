/**
 * docs/types.md's table of the types a segment can hold, against DuckDB's Parquet writer: each
 * type is written to a Parquet file and read back, and a column may have the type only where it
 * comes back as itself (HUGEINT comes back as DOUBLE: the bug that typed tables by DuckDB's
 * inference).
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { sqlString } from '../services/common/duckdb.js';
import { describe as describeColumns } from '../services/common/parquet-columns.js';

interface Row {
  type: string;
  readBack: string;
  held: string;
}

async function documentedTypes(): Promise<Row[]> {
  const text = await readFile(new URL('../docs/types.md', import.meta.url), 'utf8');
  const table = text.slice(text.indexOf('## Every type a segment can hold'));
  return table
    .split('\n')
    .filter((line) => /^\| `/.test(line))
    .map((line) => {
      const [type, readBack, held] = line.split(' | ').map((cell) => cell.replace(/^\| /, '').replaceAll('`', ''));
      return { type: type!, readBack: readBack!, held: held! };
    });
}

describe('the types a segment can hold', () => {
  let dir: string;
  let duckdb: DuckDBInstance;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-types-'));
    duckdb = await DuckDBInstance.create(':memory:');
  });
  afterAll(async () => {
    duckdb.closeSync();
    await rm(dir, { recursive: true, force: true });
  });

  it('are those DuckDB reads back from Parquet as themselves, as docs/types.md says of each', async () => {
    const rows = await documentedTypes();
    expect(rows.length).toBeGreaterThanOrEqual(30);
    const c = await duckdb.connect();
    try {
      for (const [i, row] of rows.entries()) {
        const file = path.join(dir, `${i}.parquet`);
        await c.run(`COPY (SELECT CAST(NULL AS ${row.type}) AS c) TO ${sqlString(file)} (FORMAT parquet)`);
        const [written] = await describeColumns(c, `(SELECT CAST(NULL AS ${row.type}) AS c)`);
        const [read] = await describeColumns(c, `read_parquet(${sqlString(file)})`);
        expect(read!.type, row.type).toBe(row.readBack);
        const held = read!.type === written!.type ? 'yes' : /^as /.test(row.held) ? row.held : 'no';
        expect(row.held.startsWith(held), `${row.type}: a column may have it: ${row.held}`).toBe(true);
      }
    } finally {
      c.closeSync();
    }
  });
});

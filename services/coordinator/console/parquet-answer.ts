/**
 * The SQL editor's Parquet download: a query's answer (rows as JSON, with DuckDB's type names)
 * written back into Parquet by a DuckDB of its own, locked to a scratch directory made for the
 * call and removed after it, so each column keeps the type the query gave it.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { quoteIdent } from '../../../core/identifiers.js';
import { openSandboxedDuckDB, sqlString, withConnection } from '../../common/duckdb.js';
import type { QueryResult } from '../api.js';

export async function answerAsParquet(answer: Pick<QueryResult, 'columns' | 'types' | 'rows'>): Promise<Buffer> {
  const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-parquet-'));
  try {
    const instance = await openSandboxedDuckDB({
      allowedDirectories: [dir],
      tempDirectory: dir,
      threads: 1,
      memoryLimit: '256MB',
    });
    try {
      // Columns by position (c0, c1, …): an answer may repeat a name, JSON keys may not.
      const rows = path.join(dir, 'rows.ndjson');
      await writeFile(
        rows,
        answer.rows.map((row) => JSON.stringify(Object.fromEntries(row.map((v, i) => [`c${i}`, v])))).join('\n'),
      );
      const columns = answer.types.map((type, i) => `c${i}: ${sqlString(type)}`).join(', ');
      const select = answer.columns.map((name, i) => `c${i} AS ${quoteIdent(name)}`).join(', ');
      const out = path.join(dir, 'answer.parquet');
      await withConnection(instance, (c) =>
        c.run(
          `COPY (SELECT ${select} FROM read_json(${sqlString(rows)}, format = 'newline_delimited', columns = {${columns}})) TO ${sqlString(out)} (FORMAT parquet)`,
        ),
      );
      return await readFile(out);
    } finally {
      instance.closeSync();
    }
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

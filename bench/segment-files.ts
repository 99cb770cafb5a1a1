/**
 * The benches' generated tables: Parquet segment files written once by DuckDB from a SELECT over a
 * range of row numbers, and kept in a directory for reruns (a `done` marker says they are whole).
 */
import { existsSync } from 'node:fs';
import { mkdir, readdir, rm, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { DuckDBInstance } from '@duckdb/node-api';

export interface SegmentFilesSpec {
  dir: string;
  files: number;
  rowsPerFile: number;
  /** The file name of segment `f`. */
  name: (f: number) => string;
  /** A SELECT over `range(from, to) t(i)`: one row per i. */
  rows: (from: number, to: number) => string;
}

/** The files' paths, sorted; written first when the directory does not hold them all. */
export async function segmentFiles(spec: SegmentFilesSpec): Promise<string[]> {
  if (!existsSync(path.join(spec.dir, 'done'))) {
    await rm(spec.dir, { recursive: true, force: true });
    await mkdir(spec.dir, { recursive: true });
    const db = await DuckDBInstance.create(':memory:');
    const c = await db.connect();
    for (let f = 0; f < spec.files; f++) {
      const from = f * spec.rowsPerFile;
      await c.run(
        `COPY (${spec.rows(from, from + spec.rowsPerFile)}) TO '${path.join(spec.dir, spec.name(f))}' (FORMAT parquet)`,
      );
    }
    c.closeSync();
    db.closeSync();
    await writeFile(path.join(spec.dir, 'done'), '');
  }
  return (await readdir(spec.dir))
    .filter((f) => f.endsWith('.parquet'))
    .sort()
    .map((f) => path.join(spec.dir, f));
}

/**
 * Which columns a query reads from its Parquet files, as DuckDB's own optimised plan says: the
 * segment cache fetches those columns' chunks and no others (segment-parts.ts). The plan is
 * taken with the tables bound to files that may hold only their footers: binding and planning
 * read footers alone.
 *
 * Each Parquet scan in the plan lists the columns it projects ("Projections") and the filters
 * pushed into it ("Filters", as text naming their columns); both are returned as they are, and
 * a column counts as read when its name occurs in one of them, which errs towards fetching more.
 * A scan that does not list its projections reads everything (undefined). DuckDB answers some
 * queries from footers alone (count(*)): their plans have no Parquet scan and read no column.
 * The plan can also say too little: a filter that the files' statistics make always true is gone
 * from it while its column is still read, so Scanner.columnsRead adds the columns the coordinator
 * named for the scan.
 */
import type { DuckDBConnection } from '@duckdb/node-api';
import { streamWith, type SqlParameter } from './sql-parameters.js';

/** Extra-info fields of a scan that never name a column. */
const NOT_COLUMNS = new Set(['Function', 'Estimated Cardinality', 'Total Files Read', 'Scanning Files']);

/** The strings naming what `sql`'s Parquet scans read, or undefined when that cannot be told (read everything). */
export async function parquetScanMentions(
  connection: DuckDBConnection,
  sql: string,
  parameters: readonly SqlParameter[] = [],
): Promise<string[] | undefined> {
  const rows = await (await streamWith(connection, `EXPLAIN (FORMAT json) ${sql}`, parameters)).getRowsJson();
  const mentions: string[] = [];
  let readsAll = false;
  const visit = (operator: { name?: string; extra_info?: Record<string, unknown>; children?: unknown[] }) => {
    const info = operator.extra_info ?? {};
    if (/parquet/i.test(`${operator.name ?? ''} ${String(info.Function ?? '')}`)) {
      if (!('Projections' in info)) readsAll = true;
      for (const [key, value] of Object.entries(info)) {
        if (!NOT_COLUMNS.has(key)) mentions.push(...(Array.isArray(value) ? value.map(String) : [String(value)]));
      }
    }
    for (const child of operator.children ?? []) visit(child as typeof operator);
  };
  for (const row of rows) {
    for (const operator of JSON.parse(String(row[1])) as unknown[]) visit(operator as Parameters<typeof visit>[0]);
  }
  return readsAll ? undefined : mentions;
}

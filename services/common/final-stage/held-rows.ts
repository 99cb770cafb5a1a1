/**
 * Rows of the scan stage held in the coordinator's memory until the final stage reads them,
 * through a DuckDB table function. A small partial then reaches the final SQL without a table made,
 * filled, committed and dropped for it: those catalog writes and the appender's synchronous commit
 * were most of a small query's cost on the coordinator. The bytes held are capped for the whole
 * process; a stream past the cap goes to a DuckDB table instead (exchange.ts).
 *
 * DuckDB runs these callbacks on the event loop while its own thread waits for them: nothing may
 * hold the event loop on a connection whose query reads held rows (a synchronous close would wait
 * for that query, which waits for the event loop). The Exchange retires such connections off it.
 */
import { randomUUID } from 'node:crypto';
import {
  DuckDBListValue,
  DuckDBTableFunction,
  LIST,
  VARCHAR,
  type DuckDBConnection,
  type DuckDBType,
} from '@duckdb/node-api';
import duckdb from '@duckdb/node-bindings';
import type * as arrow from 'apache-arrow';
import { fillChunk } from '../arrow-exchange.js';
import { sqlString } from '../duckdb.js';

/** The table function's name: `SELECT * FROM berth_held_rows(['<key>', …])` reads the rows of streams of one column list. */
export const HELD_ROWS_FUNCTION = 'berth_held_rows';

/** One stream's rows, as the batches they arrived in; its columns are c0, c1, … */
export interface HeldRows {
  /** Under this key, which no one can guess: the function is in every connection's catalog. */
  readonly key: string;
  readonly types: readonly DuckDBType[];
  readonly batches: arrow.RecordBatch[];
  rows: number;
  bytes: number;
}

export class HeldRowsStore {
  private readonly held = new Map<string, HeldRows>();
  private used = 0;

  /** `budgetBytes`: the most the process holds at once, over every query (0: nothing, every stream goes to a table). */
  constructor(readonly budgetBytes: number) {}

  /** Makes the rows readable by SQL on every connection of the instance `connection` belongs to. */
  register(connection: DuckDBConnection): void {
    connection.registerTableFunction(this.tableFunction());
  }

  /** A new, empty holding of rows of `types`. */
  open(types: readonly DuckDBType[]): HeldRows {
    const rows: HeldRows = { key: randomUUID(), types, batches: [], rows: 0, bytes: 0 };
    this.held.set(rows.key, rows);
    return rows;
  }

  /** Keeps `batch` with `rows` when the budget allows; false (nothing kept) when it does not. */
  add(rows: HeldRows, batch: arrow.RecordBatch): boolean {
    const bytes = batch.data.byteLength;
    if (this.used + bytes > this.budgetBytes) return false;
    this.used += bytes;
    rows.bytes += bytes;
    rows.rows += batch.numRows;
    rows.batches.push(batch);
    return true;
  }

  /** Forgets the rows (a final stage reading them keeps them until it is done). */
  drop(rows: HeldRows): void {
    if (!this.held.delete(rows.key)) return;
    this.used -= rows.bytes;
  }

  /** SQL reading the rows of streams of one column list, one after another (one call: each call is a few trips to this thread). */
  sql(parts: readonly HeldRows[]): string {
    return `SELECT * FROM ${HELD_ROWS_FUNCTION}([${parts.map((p) => sqlString(p.key)).join(', ')}])`;
  }

  /** Bytes held now, over every query. */
  get usedBytes(): number {
    return this.used;
  }

  private tableFunction(): DuckDBTableFunction {
    return DuckDBTableFunction.create({
      name: HELD_ROWS_FUNCTION,
      parameterTypes: [LIST(VARCHAR)],
      bindFunction: (info) => {
        const keys = (info.getParameter(0) as DuckDBListValue | null)?.items ?? [];
        const parts = keys.map((key) => this.held.get(String(key)));
        if (parts.length === 0 || parts.some((p) => p === undefined))
          return info.setError('no rows are held under that key');
        const types = parts[0]!.types;
        types.forEach((type, i) => info.addResultColumn(`c${i}`, type));
        info.setCardinality(
          parts.reduce((sum, p) => sum + p!.rows, 0),
          true,
        );
        info.setBindData({ types, batches: parts.flatMap((p) => p!.batches) });
      },
      initFunction: (info) => {
        info.setMaxThreads(1);
        info.setInitData({ batch: 0, row: 0 });
      },
      mainFunction: (info, chunk) => {
        const { types, batches } = info.getBindData() as { types: DuckDBType[]; batches: arrow.RecordBatch[] };
        const at = info.getInitData() as { batch: number; row: number };
        try {
          chunk.reset();
          while (at.batch < batches.length && at.row >= batches[at.batch]!.numRows) {
            at.batch++;
            at.row = 0;
          }
          const batch = batches[at.batch];
          if (!batch) return void (chunk.rowCount = 0);
          const count = Math.min(duckdb.vector_size(), batch.numRows - at.row);
          fillChunk(chunk, types, batch, at.row, count);
          at.row += count;
        } catch (error) {
          info.setError(`reading held rows failed: ${(error as Error).message}`);
        }
      },
    });
  }
}

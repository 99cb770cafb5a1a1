/**
 * The final stage of a query, on a final-stage DuckDB (engine.ts: the coordinator's, or a heavy
 * backend's): its inputs fill as the scan stage streams rows in, and the final SQL runs over them,
 * into one answer or streamed to the client.
 */
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import type { DuckDBAppender, DuckDBConnection, DuckDBInstance, DuckDBType } from '@duckdb/node-api';
import type { LRUCache } from 'lru-cache';
import { quoteIdent } from '../../../core/identifiers.js';
import { appendBatch, arrowBatches } from '../arrow-exchange.js';
import { interruptOnAbort, isOutOfMemory, queryError, ResultCutShort } from '../duckdb.js';
import { DomainError } from '../errors.js';
import { runWith, streamWith, type SqlParameter } from '../sql-parameters.js';
import type { ExchangeColumn, ExchangeInput } from './contract.js';
import type { ConnectionPool } from './connection-pool.js';
import type { HeldRows, HeldRowsStore } from './held-rows.js';
import { jsonChunks, readJsonResult, type JsonValue, type SizedJsonResult } from './result-json.js';

export interface RunOptions {
  /** Interrupts DuckDB mid-query. */
  signal?: AbortSignal;
  /** Largest result: past it, a 413. */
  maxBytes?: number;
  /** Values for the parameters the final SQL names. */
  parameters?: readonly SqlParameter[];
}

/** A final stage's rows, read as DuckDB makes them; close() when done with them, read or not. */
export interface StreamedRows {
  columns: string[];
  types: string[];
  rows: AsyncIterable<JsonValue[][]>;
  close(): void;
}

/** One stream's rows: held in memory, or (past the memory budget) in a table of the query's own schema. */
interface Part {
  name: string;
  held?: HeldRows;
}

/** The final SQL with its inputs named, on a connection: give it back (or close it) with release(). */
interface BoundFinal {
  c: DuckDBConnection;
  sql: string;
  release(reusable: boolean): void;
}

/**
 * One query's final stage. Each stream the scan stage sends (one per node and input) is a part of
 * its own, so that a stream cut short can be dropped whole and its work sent elsewhere; the final
 * SQL reads each input as the union of its parts. A part is held in memory as the batches arrive
 * (held-rows.ts); past the process's budget it goes to a table, appended batch by batch, so that
 * DuckDB holds the rows (and spills them past its memory limit), never JavaScript.
 */
/** What an exchange tells its engine, and asks of it. */
export interface ExchangeHost {
  /** The engine's memory and temp-directory limits, in words: a query past both is told them. */
  readonly limits: string;
  /** Told the rows of each stream received whole. */
  received(rows: number): void;
  /** Whether other final stages are open on the engine now. */
  shared(): boolean;
  /** Told once, when the exchange closes. */
  closed(): void;
}

export class Exchange {
  private readonly parts = new Map<string, Part[]>();
  /** Streams being received: close() waits for them, so that none writes into a dropped schema. */
  private readonly receiving = new Set<Promise<unknown>>();
  /** Final-stage connections left before their last row, being torn down: close() waits for them. */
  private readonly retiring = new Set<Promise<void>>();
  private counter = 0;
  private closed = false;
  /** The schema of the parts that went to tables, made when the first one does. */
  private readonly schema = `q_${randomUUID().replaceAll('-', '')}`;
  private schemaMade?: Promise<void>;

  constructor(
    private readonly duckdb: DuckDBInstance,
    private readonly pool: ConnectionPool,
    private readonly heldRows: HeldRowsStore,
    private readonly inputs: ExchangeInput[],
    private readonly hide: readonly string[],
    private readonly host: ExchangeHost,
    /** DuckDB's types of each column list the exchange has carried, kept across queries: asking costs a statement. */
    private readonly types: LRUCache<string, Promise<DuckDBType[]>>,
  ) {
    for (const input of inputs) this.parts.set(input.name, []);
  }

  private input(name: string): ExchangeInput {
    const input = this.inputs.find((i) => i.name === name);
    if (!input) throw new Error(`no input "${name}" in this exchange`);
    return input;
  }

  /** A column's type as it travels: a type the exchange cannot carry as it is travels as text. */
  private static travelType(col: ExchangeColumn): string {
    return col.asText ? 'VARCHAR' : col.type;
  }

  /** The columns as they travel, for a table. */
  private columnsSql(input: ExchangeInput): string {
    return input.columns.map((col, i) => `c${i} ${Exchange.travelType(col)}`).join(', ');
  }

  /** No rows, of the columns as they travel. */
  private noRowsSql(input: ExchangeInput): string {
    return `SELECT ${input.columns.map((col, i) => `CAST(NULL AS ${Exchange.travelType(col)}) AS c${i}`).join(', ')} LIMIT 0`;
  }

  /** DuckDB's types of the columns as they travel. */
  private typesOf(input: ExchangeInput): Promise<DuckDBType[]> {
    const columns = this.columnsSql(input);
    let types = this.types.get(columns);
    if (!types) {
      types = this.pool.use(async (c) => (await c.runAndReadAll(this.noRowsSql(input))).columnTypes());
      const asked = types;
      asked.catch(() => this.types.delete(columns)); // a failure is asked again next time
      this.types.set(columns, asked);
    }
    return types;
  }

  /** Receives one Arrow IPC stream into an input; resolves with its part (for discard) and its rows. */
  receive(name: string, body: Readable): Promise<{ part: string; rows: number }> {
    if (this.closed) {
      body.destroy();
      return Promise.reject(new Error('this exchange is closed'));
    }
    const receiving = this.append(name, body);
    void receiving.then(
      ({ rows }) => this.host.received(rows),
      () => {},
    );
    const settled: Promise<boolean> = receiving.then(
      () => this.receiving.delete(settled),
      () => this.receiving.delete(settled),
    );
    this.receiving.add(settled);
    return receiving;
  }

  private async append(name: string, body: Readable): Promise<{ part: string; rows: number }> {
    const input = this.input(name);
    const part: Part = { name: `p${this.counter++}` };
    this.parts.get(name)!.push(part);
    let rows = 0;
    try {
      const types = await this.typesOf(input);
      // The node sends columns c0, c1, … of the planned types: a stream that does not is refused before its first batch.
      const fields = types.map((type, i) => ({ name: `c${i}`, type, column: input.columns[i]!.name }));
      part.held = this.heldRows.open(types);
      let table: { c: DuckDBConnection; appender: DuckDBAppender } | undefined;
      let appended = false;
      try {
        for await (const batch of arrowBatches(body, fields)) {
          rows += batch.numRows;
          if (!table && this.heldRows.add(part.held!, batch)) continue;
          table ??= await this.toTable(input, part);
          appendBatch(table.appender, types, batch);
        }
        table?.appender.flushSync();
        appended = true;
      } finally {
        if (table) {
          try {
            table.appender.closeSync();
          } catch {
            // flushed above when all went well; otherwise the part is discarded below
          }
          this.pool.giveBack(table.c, appended);
        }
      }
      return { part: part.name, rows };
    } catch (error) {
      body.destroy();
      await this.discard(name, part.name);
      throw this.outOfMemory(error) ?? error; // its rows outgrew the engine on their way to a table
    }
  }

  /** Moves a part's held rows into a table of its own, and hands back the appender for the rest. */
  private async toTable(input: ExchangeInput, part: Part): Promise<{ c: DuckDBConnection; appender: DuckDBAppender }> {
    await (this.schemaMade ??= this.pool.use(async (c) => void (await c.run(`CREATE SCHEMA ${this.schema}`))));
    const c = await this.pool.take();
    let appender: DuckDBAppender | undefined;
    try {
      await c.run(`CREATE TABLE ${this.schema}.${part.name} (${this.columnsSql(input)})`);
      appender = await c.createAppender(part.name, this.schema);
      const held = part.held!;
      for (const batch of held.batches) appendBatch(appender, held.types, batch);
      this.heldRows.drop(held);
      part.held = undefined;
      return { c, appender };
    } catch (error) {
      // Closed here, on a connection no one else uses, rather than by a finalizer at any moment.
      try {
        appender?.closeSync();
      } catch {
        // the part is discarded
      }
      this.pool.giveBack(c, false);
      throw error;
    }
  }

  /** Drops what a stream cut short had sent: its work is done again elsewhere. */
  async discard(name: string, partName: string): Promise<void> {
    const parts = this.parts.get(name)!;
    const at = parts.findIndex((p) => p.name === partName);
    if (at < 0) return;
    const [part] = parts.splice(at, 1);
    if (part!.held) this.heldRows.drop(part!.held);
    else if (this.schemaMade) await this.pool.use((c) => c.run(`DROP TABLE IF EXISTS ${this.schema}.${part!.name}`));
  }

  /** Runs the final SQL over the inputs. DuckDB's errors about the query are 400s; a result past `maxBytes` a 413. */
  async finish(finalSql: string, options: RunOptions = {}): Promise<SizedJsonResult> {
    const { c, sql, release } = await this.bindFinal(finalSql);
    let done = false;
    try {
      const result = await this.run(c, options.signal, async () => {
        try {
          return await readJsonResult(await streamWith(c, sql, options.parameters), options.maxBytes);
        } catch (error) {
          if (!(error instanceof ResultCutShort)) throw error;
          throw await this.reasonFor(c, sql, options.parameters, error, options.signal);
        }
      });
      done = true;
      return result;
    } finally {
      release(done && !options.signal?.aborted);
    }
  }

  /**
   * Runs the final SQL over the inputs and hands its rows over as the reader takes them, one DuckDB
   * chunk at a time: DuckDB computes no further ahead than the reader reads. Errors found before
   * the first row (DuckDB's about the query: 400s) reject; later ones end `rows` with the error.
   * close() only between two reads: a read in flight may be waiting on this thread for held rows.
   */
  async stream(
    finalSql: string,
    signal?: AbortSignal,
    parameters: readonly SqlParameter[] = [],
  ): Promise<StreamedRows> {
    const { c, sql, release } = await this.bindFinal(finalSql);
    let open = true;
    let ended = false;
    const close = () => {
      if (open) release(ended && !signal?.aborted);
      open = false;
    };
    try {
      const result = await this.run(c, signal, () => streamWith(c, sql, parameters));
      const rows = this.rowsOf(c, jsonChunks(result), signal, sql, parameters, () => (ended = true));
      return { columns: result.columnNames(), types: result.columnTypes().map(String), rows, close };
    } catch (error) {
      close();
      throw error;
    }
  }

  /** `chunks`, each read under `signal` with DuckDB's errors made 400s; `onEnd` once the last is read. */
  private async *rowsOf(
    c: DuckDBConnection,
    chunks: AsyncGenerator<JsonValue[][]>,
    signal: AbortSignal | undefined,
    sql: string,
    parameters: readonly SqlParameter[],
    onEnd: () => void,
  ): AsyncGenerator<JsonValue[][]> {
    try {
      for (let next = await this.run(c, signal, () => chunks.next()); !next.done;) {
        yield next.value;
        next = await this.run(c, signal, () => chunks.next());
      }
      onEnd();
    } catch (error) {
      if (!(error instanceof ResultCutShort)) throw error;
      throw await this.reasonFor(c, sql, parameters, error, signal);
    }
  }

  /**
   * What to throw for a final stage DuckDB cut short (duckdb.ts, resultChunks): its reason, from
   * the query run again as EXPLAIN ANALYZE (the same error, none of the rows kept), as a 400 where
   * it is the query's fault; the cut itself when the run goes through this time.
   */
  private async reasonFor(
    c: DuckDBConnection,
    sql: string,
    parameters: readonly SqlParameter[] | undefined,
    cut: ResultCutShort,
    signal: AbortSignal | undefined,
  ): Promise<unknown> {
    signal?.throwIfAborted(); // interrupted: there is no reason to look for
    try {
      await this.run(c, signal, () => runWith(c, `EXPLAIN ANALYZE ${sql}`, parameters));
      return cut;
    } catch (reason) {
      return reason;
    }
  }

  /** One input as the union of its parts, its columns named and typed as the final SQL reads them. */
  private inputSql(input: ExchangeInput): string {
    const parts = this.parts.get(input.name)!;
    const held = parts.flatMap((p) => (p.held ? [p.held] : []));
    const sources = [
      ...(held.length > 0 ? [this.heldRows.sql(held)] : []),
      ...parts.filter((p) => !p.held).map((p) => `SELECT * FROM ${this.schema}.${p.name}`),
    ];
    if (sources.length === 0) sources.push(this.noRowsSql(input));
    const columns = input.columns.map(
      (col, i) => `${col.asText ? `CAST(c${i} AS ${col.type})` : `c${i}`} AS ${quoteIdent(col.name)}`,
    );
    return `SELECT ${columns.join(', ')} FROM (${sources.join(' UNION ALL ')})`;
  }

  /**
   * The final SQL with each input named: in a WITH clause put before it, on a pooled connection
   * (nothing is created), or, where the SQL has a WITH clause of its own, as temp views on a
   * connection of its own.
   */
  private async bindFinal(finalSql: string): Promise<BoundFinal> {
    if (this.inputs.length === 0 || !/^\s*with\b/i.test(finalSql)) {
      const c = await this.pool.take();
      const named = this.inputs.map((i) => `${quoteIdent(i.name)} AS (${this.inputSql(i)})`);
      const sql = named.length > 0 ? `WITH ${named.join(', ')} ${finalSql}` : finalSql;
      return { c, sql, release: (reusable) => (reusable ? this.pool.giveBack(c) : this.retire(c)) };
    }
    const c = await this.duckdb.connect();
    try {
      for (const input of this.inputs)
        await c.run(`CREATE TEMP VIEW ${quoteIdent(input.name)} AS ${this.inputSql(input)}`);
    } catch (error) {
      c.closeSync();
      throw error;
    }
    return { c, sql: finalSql, release: (reusable) => (reusable ? c.closeSync() : this.retire(c)) };
  }

  /**
   * Ends a connection whose query may still be running (its answer was not read to the end: a
   * 413, a client gone). Closing it at once would tear the query down on this thread while
   * DuckDB's workers may be waiting on this very thread for held rows: the query is interrupted
   * and torn down by another statement, off the event loop, and the connection closed after.
   */
  private retire(c: DuckDBConnection): void {
    c.interrupt();
    const retired = c
      .run('SELECT 1')
      .then(
        () => undefined,
        () => undefined,
      )
      .finally(() => {
        c.closeSync();
        this.retiring.delete(retired);
      });
    this.retiring.add(retired);
  }

  /**
   * Runs a step of the final stage: `signal` interrupts DuckDB, DuckDB's errors about the query
   * become 400s, and a state past both of the engine's limits a 413.
   */
  private async run<T>(c: DuckDBConnection, signal: AbortSignal | undefined, step: () => Promise<T>): Promise<T> {
    signal?.throwIfAborted();
    const stopInterrupting = interruptOnAbort(c, signal);
    try {
      return await step();
    } catch (error) {
      signal?.throwIfAborted();
      throw queryError(error, this.hide) ?? this.outOfMemory(error) ?? error;
    } finally {
      stopInterrupting();
    }
  }

  /**
   * Drops every row the query received, once no stream is still being received (their scans were
   * stopped) and no final stage still reads them.
   */
  /**
   * DuckDB out of memory and temp directory: a 413 when this was the engine's only final stage
   * (the query's state is too large for it), else a 503 to run it again (the stages running at
   * once outgrew it together). Undefined for any other error.
   */
  private outOfMemory(error: unknown): DomainError | undefined {
    if (!isOutOfMemory(error)) return undefined;
    const reason = (error as Error).message;
    if (!this.host.shared())
      return new DomainError(
        'too_large',
        'query_state_too_large',
        `the query's state is larger than its final stage can hold in memory and spill to disk (${this.host.limits}): ${reason}`,
      );
    return new DomainError(
      'unavailable',
      'final_stage_out_of_memory',
      `the final stages running at once outgrew their engine's memory and temp directory (${this.host.limits}); run the query again: ${reason}`,
    );
  }

  async close(): Promise<void> {
    if (!this.closed) this.host.closed();
    this.closed = true;
    while (this.receiving.size > 0 || this.retiring.size > 0) await Promise.all([...this.receiving, ...this.retiring]);
    for (const parts of this.parts.values()) for (const part of parts) if (part.held) this.heldRows.drop(part.held);
    if (!this.schemaMade) return;
    await this.schemaMade.catch(() => undefined);
    await this.pool.use((c) => c.run(`DROP SCHEMA IF EXISTS ${this.schema} CASCADE`));
  }
}

/**
 * The coordinator's own DuckDB for queries: one instance for the planner's parser and binder
 * (planning/sql-binder.ts) and for the final stage of every light query, which runs over the rows
 * the scan stage streams in (common/final-stage/). Ingest has a DuckDB of its own
 * (ingest/segment-writer.ts): nothing a query runs can reach a batch in flight.
 */
import { FinalStageEngine, type FinalStageSettings } from '../common/final-stage/engine.js';
import type { Exchange } from '../common/final-stage/exchange.js';
import type { HeldRowsStore } from '../common/final-stage/held-rows.js';
import { SqlBinder, type FunctionNames } from './planning/sql-binder.js';
import type { ExchangeInput } from './stages.js';

export { DEFAULT_EXCHANGE_MEMORY_BYTES } from '../common/final-stage/engine.js';

export class SqlEngine extends SqlBinder {
  private constructor(
    private readonly finals: FinalStageEngine,
    functions: FunctionNames,
  ) {
    super(finals.duckdb, finals.pool, functions);
  }

  /**
   * `scratchDir` holds partial results only: the engine runs users' SQL, so it can read nothing
   * else. `exchangeMemoryBytes` caps the scan-stage rows held in memory for final stages, over
   * every query (past it, rows go to tables of the engine's DuckDB).
   */
  static async open(scratchDir: string, settings: FinalStageSettings = {}): Promise<SqlEngine> {
    const finals = await FinalStageEngine.open(scratchDir, settings);
    return new SqlEngine(finals, await SqlBinder.functionNames(finals.duckdb));
  }

  /** Scan-stage rows the final stages read from memory. */
  get heldRows(): HeldRowsStore {
    return this.finals.heldRows;
  }

  /** Rows the scan stage has sent this coordinator's final stages (heavy queries' go to a backend). */
  get rowsReceived(): number {
    return this.finals.rowsReceived;
  }

  close(): void {
    this.closeBindings();
    this.finals.close();
  }

  /** A place for one query's final stage: its inputs fill as the scan stage streams rows in. */
  openExchange(inputs: ExchangeInput[]): Exchange {
    return this.finals.openExchange(inputs);
  }
}

/**
 * A DuckDB for final stages: each query's opens an exchange (exchange.ts) whose inputs fill as the
 * scan stage streams rows in, then runs the final SQL over them. The coordinator has one for light
 * queries (coordinator/sql-engine.ts); a heavy backend has one for the heavy queries whose final
 * stage it runs. It runs users' SQL, so it can read nothing but its own scratch directory.
 */
import { mkdir, rm } from 'node:fs/promises';
import path from 'node:path';
import type { DuckDBInstance, DuckDBType } from '@duckdb/node-api';
import { LRUCache } from 'lru-cache';
import { memoryLimitOf, openSandboxedDuckDB, withConnection, type SandboxedDuckDBOptions } from '../duckdb.js';
import { ConnectionPool } from './connection-pool.js';
import type { ExchangeInput } from './contract.js';
import { Exchange } from './exchange.js';
import { HeldRowsStore } from './held-rows.js';

/** Scan-stage rows a process holds in memory for final stages at most, by default. */
export const DEFAULT_EXCHANGE_MEMORY_BYTES = 64 * 1024 ** 2;

export interface FinalStageSettings extends Pick<
  SandboxedDuckDBOptions,
  'threads' | 'memoryLimit' | 'tempDirectoryLimit'
> {
  /** Scan-stage rows held in memory over every final stage at once; past it they go to tables. @default 64 MiB */
  exchangeMemoryBytes?: number;
}

export class FinalStageEngine {
  /** Rows the scan stage has sent this engine's final stages, over its lifetime (/metrics). */
  rowsReceived = 0;
  /** Final stages open now, which share its memory and temp directory. */
  private openExchanges = 0;
  private readonly exchangeTypes = new LRUCache<string, Promise<DuckDBType[]>>({ max: 1000 });

  private constructor(
    readonly duckdb: DuckDBInstance,
    readonly pool: ConnectionPool,
    private readonly scratchDir: string,
    /** Scan-stage rows the final stages read from memory. */
    readonly heldRows: HeldRowsStore,
    /** Its DuckDB's memory and temp-directory limits, in words. */
    private readonly limits: string,
  ) {}

  /** Opens an engine in `scratchDir` (emptied first: it holds nothing but partial results and spills). */
  static async open(scratchDir: string, settings: FinalStageSettings = {}): Promise<FinalStageEngine> {
    await rm(scratchDir, { recursive: true, force: true });
    await mkdir(path.join(scratchDir, 'spill'), { recursive: true, mode: 0o700 });
    const { exchangeMemoryBytes = DEFAULT_EXCHANGE_MEMORY_BYTES, ...duckdbSettings } = settings;
    const duckdb = await openSandboxedDuckDB({
      allowedDirectories: [scratchDir],
      tempDirectory: path.join(scratchDir, 'spill'),
      ...duckdbSettings,
    });
    const heldRows = new HeldRowsStore(exchangeMemoryBytes);
    await withConnection(duckdb, async (c) => heldRows.register(c));
    const limits = `memory ${memoryLimitOf(duckdbSettings.memoryLimit)}, temp directory ${duckdbSettings.tempDirectoryLimit ?? "90 % of the disk's free space"}`;
    return new FinalStageEngine(duckdb, new ConnectionPool(duckdb), scratchDir, heldRows, limits);
  }

  /** A place for one query's final stage: its inputs fill as the scan stage streams rows in. */
  openExchange(inputs: ExchangeInput[]): Exchange {
    this.openExchanges++;
    return new Exchange(
      this.duckdb,
      this.pool,
      this.heldRows,
      inputs,
      [this.scratchDir],
      {
        limits: this.limits,
        received: (rows) => (this.rowsReceived += rows),
        shared: () => this.openExchanges > 1,
        closed: () => this.openExchanges--,
      },
      this.exchangeTypes,
    );
  }

  close(): void {
    this.pool.close();
    this.duckdb.closeSync();
  }
}

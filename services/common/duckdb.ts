/**
 * DuckDB locked to the directories a service owns. Once open, the engine refuses every other file
 * (no read_csv('/etc/passwd'), no ATTACH, no extension downloads), so SQL that reaches it can
 * only read segments and write scan results where the service expects them.
 */
import { readFileSync } from 'node:fs';
import os from 'node:os';
import { DuckDBInstance, type DuckDBConnection, type DuckDBDataChunk, type DuckDBResult } from '@duckdb/node-api';
import { badRequest, type DomainError } from './errors.js';

export interface SandboxedDuckDBOptions {
  /** Directories the engine may read and write (segment cache, scratch). */
  allowedDirectories: string[];
  /** Where DuckDB spills when a query outgrows memory; must be inside an allowed directory. */
  tempDirectory: string;
  /** @default DuckDB's default (all cores) */
  threads?: number;
  /** A size ('2GB') or a share of the memory available ('60%'). @default memoryLimitOf(undefined) */
  memoryLimit?: string;
  /** The most its temp directory holds (max_temp_directory_size), e.g. '20GiB'. @default DuckDB's: 90 % of the disk's free space */
  tempDirectoryLimit?: string;
  /**
   * Keeps Parquet footers in memory between queries, for files that never change once written
   * under their name (a query node's segments: one object per id). @default false
   */
  cacheParquetFooters?: boolean;
}

const sqlString = (s: string) => `'${s.replaceAll("'", "''")}'`;

export async function openSandboxedDuckDB(options: SandboxedDuckDBOptions): Promise<DuckDBInstance> {
  const instance = await DuckDBInstance.create(':memory:');
  const connection = await instance.connect();
  try {
    const dirs = options.allowedDirectories.map((d) => sqlString(d.endsWith('/') ? d : `${d}/`)).join(', ');
    await connection.run(`SET allowed_directories = [${dirs}]`);
    await connection.run(`SET temp_directory = ${sqlString(options.tempDirectory)}`);
    if (options.threads) await connection.run(`SET threads = ${Math.max(1, Math.floor(options.threads))}`);
    await connection.run(`SET memory_limit = ${sqlString(memoryLimitOf(options.memoryLimit))}`);
    if (options.tempDirectoryLimit)
      await connection.run(`SET max_temp_directory_size = ${sqlString(options.tempDirectoryLimit)}`);
    // DuckDB's file cache checks a file's modification time to the second: a file filled in place
    // (a segment held in part) within the second after a read would be read as it was.
    await connection.run('SET enable_external_file_cache = false');
    if (options.cacheParquetFooters) await connection.run('SET parquet_metadata_cache = true');
    // Times with a zone are read and shown in UTC whatever the host's zone: one answer everywhere.
    await connection.run("SET TimeZone = 'UTC'");
    // DuckDB 1.5's rewrite of a top-N window (QUALIFY row_number() … <= k) into an aggregate fails
    // over a table function's rows filtered on a struct field ("INTERNAL Error: Failed to cast
    // expression to type"), which is how a final stage reads held rows; its fixes since are for
    // rows it dropped. The window is computed as written instead: the same answer, always.
    await connection.run("SET disabled_optimizers = 'top_n_window_elimination'");
    await connection.run('SET autoinstall_known_extensions = false');
    await connection.run('SET autoload_known_extensions = false');
    await connection.run('SET enable_external_access = false');
    await connection.run('SET lock_configuration = true');
  } finally {
    connection.closeSync();
  }
  return instance;
}

/** How often an aborted query is interrupted again until its step settles (interruptOnAbort). */
const INTERRUPT_AGAIN_MS = 10;

/**
 * Interrupts `connection`'s query once `signal` aborts (at once if it has), and again every few
 * milliseconds until the returned function is called. DuckDB forgets an interrupt that comes
 * before its query starts (while it is being prepared, or between the prepare and the execution):
 * a single interrupt can be lost, and the query then runs to its end. Call the returned function
 * before the connection runs anything outside this step.
 */
export function interruptOnAbort(connection: DuckDBConnection, signal: AbortSignal | undefined): () => void {
  if (!signal) return () => undefined;
  let again: NodeJS.Timeout | undefined;
  const interrupt = () => {
    connection.interrupt();
    again = setInterval(() => connection.interrupt(), INTERRUPT_AGAIN_MS).unref();
  };
  if (signal.aborted) interrupt();
  else signal.addEventListener('abort', interrupt, { once: true });
  return () => {
    signal.removeEventListener('abort', interrupt);
    clearInterval(again);
  };
}

/**
 * Runs `work` on a fresh connection (its own temp views) and always closes it. When `signal`
 * aborts, the running query is interrupted and the call rejects with the signal's reason.
 */
export async function withConnection<T>(
  instance: DuckDBInstance,
  work: (c: DuckDBConnection) => Promise<T>,
  signal?: AbortSignal,
): Promise<T> {
  signal?.throwIfAborted();
  const connection = await instance.connect();
  const stopInterrupting = interruptOnAbort(connection, signal);
  try {
    return await work(connection);
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw error;
  } finally {
    stopInterrupting();
    connection.closeSync();
  }
}

export { sqlString };

/** A streamed result that DuckDB stopped part way with an error (see resultChunks). */
export class ResultCutShort extends Error {
  override name = 'ResultCutShort';
  constructor() {
    super('DuckDB stopped the query part way through its rows, with an error it does not report while streaming');
  }
}

/**
 * A result's chunks, to its real end. DuckDB's C API ends a streamed result that fails part way
 * (a failed cast, an overflow, error(), the memory limit) just as it ends one that is done, and
 * the Node binding does not expose duckdb_result_error; a failed result stops calling itself
 * streaming, which is checked at the end, so that a result cut short is never taken for a whole
 * one. A caller that wants DuckDB's reason runs the query again unstreamed: a fault of the
 * query's own recurs, with its message.
 */
export async function* resultChunks(result: DuckDBResult): AsyncGenerator<DuckDBDataChunk> {
  const streaming = result.isStreaming;
  for (let chunk = await result.fetchChunk(); chunk && chunk.rowCount > 0; chunk = await result.fetchChunk())
    yield chunk;
  if (streaming && !result.isStreaming) throw new ResultCutShort();
}

/** The memory this process may count on: its cgroup's limit (v2, then v1) when it has one, else the machine's. */
export function availableMemoryBytes(): number {
  for (const file of ['/sys/fs/cgroup/memory.max', '/sys/fs/cgroup/memory/memory.limit_in_bytes']) {
    try {
      const limit = Number(readFileSync(file, 'utf8').trim());
      if (Number.isFinite(limit) && limit > 0 && limit < os.totalmem()) return limit;
    } catch {
      // no such controller here
    }
  }
  return os.totalmem();
}

/**
 * DuckDB's memory limit from a setting: a size as DuckDB reads it ('2GB'), or a share of the
 * memory available ('60%'), which DuckDB has no syntax for; so a pod's limit sizes its engines.
 * Unset: a quarter of the memory available, not DuckDB's own 80 %, since a machine or pod runs
 * other processes (and `berth up` several DuckDBs) beside it. Past the limit DuckDB spills to its
 * temp directory or fails the query, never the process.
 */
export function memoryLimitOf(setting: string | undefined): string {
  const share = /^(\d+(?:\.\d+)?)\s*%$/.exec(setting?.trim() ?? '25%');
  if (!share) return setting!;
  const percent = Number(share[1]);
  if (!(percent > 0 && percent <= 100))
    throw new Error(`a memory limit's share is above 0 % and at most 100 %, not "${setting}"`);
  return `${Math.max(64, Math.floor((availableMemoryBytes() * percent) / 100 / 1024 ** 2))}MiB`;
}

/** DuckDB's errors that the query itself causes, so that every node would fail it the same way. */
const QUERY_ERROR =
  /^(Binder|Catalog|Conversion|Constraint|Dependency|Invalid Input|Invalid type|Mismatch Type|Not implemented|Out of Range|Parser|Permission|Syntax|Type) Error: /;

/**
 * Whether DuckDB ran out of memory and of temp directory: a query's own error, or an appender's
 * (whose message wraps DuckDB's: "Failed to append: … failed to offload data block").
 */
export const isOutOfMemory = (error: unknown): boolean =>
  error instanceof Error && /Out of Memory Error: |failed to offload data block/.test(error.message);

/**
 * A DuckDB error the query caused, as a 400 with DuckDB's message (without the directories this
 * service keeps its files in); undefined for anything else (I/O, memory, interruption), which is
 * the service's trouble and not the query's.
 */
export function queryError(error: unknown, hide: readonly string[] = []): DomainError | undefined {
  const message = error instanceof Error ? error.message : '';
  if (!QUERY_ERROR.test(message)) return undefined;
  let text = message.split('\n\nLINE ')[0]!.trim();
  for (const dir of hide) text = text.replaceAll(dir, '<dir>');
  return badRequest('query_failed', text);
}

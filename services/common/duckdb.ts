/**
 * DuckDB locked to the directories a service owns. Once open, the engine refuses every other file
 * (no read_csv('/etc/passwd'), no ATTACH, no extension downloads), so SQL that reaches it can
 * only read segments and write scan results where the service expects them.
 */
import { DuckDBInstance, type DuckDBConnection } from '@duckdb/node-api';

export interface SandboxedDuckDBOptions {
  /** Directories the engine may read and write (segment cache, scratch). */
  allowedDirectories: string[];
  /** Where DuckDB spills when a query outgrows memory; must be inside an allowed directory. */
  tempDirectory: string;
  /** @default DuckDB's default (all cores) */
  threads?: number;
  /** e.g. '2GB'. @default DuckDB's default (80 % of RAM) */
  memoryLimit?: string;
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
    if (options.memoryLimit) await connection.run(`SET memory_limit = ${sqlString(options.memoryLimit)}`);
    await connection.run('SET autoinstall_known_extensions = false');
    await connection.run('SET autoload_known_extensions = false');
    await connection.run('SET enable_external_access = false');
    await connection.run('SET lock_configuration = true');
  } finally {
    connection.closeSync();
  }
  return instance;
}

/**
 * Runs `work` on a fresh connection (its own temp views) and always closes it. When `signal`
 * aborts, the running query is interrupted and the call rejects with the signal's reason.
 */
export async function withConnection<T>(instance: DuckDBInstance, work: (c: DuckDBConnection) => Promise<T>, signal?: AbortSignal): Promise<T> {
  signal?.throwIfAborted();
  const connection = await instance.connect();
  const interrupt = () => connection.interrupt();
  signal?.addEventListener('abort', interrupt, { once: true });
  try {
    return await work(connection);
  } catch (error) {
    if (signal?.aborted) throw signal.reason;
    throw error;
  } finally {
    signal?.removeEventListener('abort', interrupt);
    connection.closeSync();
  }
}

export { sqlString };

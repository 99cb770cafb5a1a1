/**
 * The PostgreSQL server the meta benches measure: a throwaway cluster of their own, fsync and
 * synchronous commit on as PostgreSQL ships; or, when BERTH_BENCH_POSTGRES_URL names a superuser
 * URL (the smoke test passes its run's server), a database made on that server, whose settings
 * then stand behind the figures.
 */
import { createDatabase, startPostgresServer, type PostgresServer } from '../cli/embedded/postgres-server.js';

export async function benchPostgres(): Promise<Pick<PostgresServer, 'createDatabase' | 'stop'> & { pid?: number }> {
  const url = process.env.BERTH_BENCH_POSTGRES_URL;
  if (!url) return startPostgresServer({ durable: true });
  return { createDatabase: (name) => createDatabase(url, name), stop: async () => {} };
}

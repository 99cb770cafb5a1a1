/** Opens meta's store from one setting: a PostgreSQL URL, or else the path of a SQLite file. */
import { PostgresMetaStore } from './postgres-store.js';
import { SqliteMetaStore } from './sqlite-store.js';
import { isPostgresUrl, type MetaStore, type MetaStoreOptions } from './store.js';

export interface OpenMetaStoreOptions extends MetaStoreOptions {
  /** `postgres://…` (or `postgresql://…`) for PostgreSQL; anything else is a SQLite file (or ':memory:'). */
  database: string;
  /** PostgreSQL only: connections in the pool. @default 10 */
  maxConnections?: number;
  /** PostgreSQL only: told when an idle pooled connection fails. */
  onIdleError?: (error: Error) => void;
}

export async function openMetaStore(options: OpenMetaStoreOptions): Promise<MetaStore> {
  const { database, ...rest } = options;
  if (isPostgresUrl(database)) return await PostgresMetaStore.open({ connectionString: database, ...rest });
  return new SqliteMetaStore({ file: database, ...rest });
}

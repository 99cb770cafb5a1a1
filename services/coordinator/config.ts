/** The coordinator's configuration: the variables it reads, their defaults and their ranges (see README). */
import { Type, type Static } from 'typebox';
import { Bytes, Host, Millis, Port, Settings } from '../common/config.js';

export const CoordinatorConfig = Type.Object({
  ...Settings.common,
  ...Settings.s3,
  ...Settings.metaUrl,
  ...Settings.memberPoll,
  ...Settings.duckDbMemory,
  ...Settings.temporal,
  ...Settings.heavyPool,
  ...Settings.servingScaler,
  ...Settings.verdict,
  /** @default DATA/coordinator */
  BERTH_COORDINATOR_DIR: Type.Optional(Type.String()),
  BERTH_COORDINATOR_HOST: Host(),
  BERTH_COORDINATOR_PORT: Port(7401),
  /** Node URLs, comma-separated, to spread work over round-robin before the first member list. */
  BERTH_SEED_NODES: Type.Optional(Type.String()),
  BERTH_MAX_CONCURRENT_QUERIES: Type.Integer({ minimum: 1, default: 16 }),
  BERTH_MAX_QUEUED_QUERIES: Type.Integer({ minimum: 0, default: 16 }),
  BERTH_QUEUE_TIMEOUT_MS: Millis({ default: 10_000 }),
  /** 0 turns the plan cache off. */
  BERTH_PLAN_CACHE_SIZE: Type.Integer({ minimum: 0, default: 1000 }),
  /** 0 (the default) turns the result cache off. */
  BERTH_RESULT_CACHE_BYTES: Type.Integer({ minimum: 0, default: 0 }),
  /** Threads of the DuckDB that runs final stages; unset: the machine's cores. */
  BERTH_DUCKDB_THREADS: Type.Optional(Type.Integer({ minimum: 1 })),
  /** 0 sends every scan-stage stream to a DuckDB table. */
  BERTH_EXCHANGE_MEMORY_BYTES: Type.Integer({ minimum: 0, default: 64 * 1024 ** 2 }),
  BERTH_QUERY_LOG_SIZE: Type.Integer({ minimum: 1, default: 10_000 }),
  BERTH_HEAVY_QUEUE_TIMEOUT_MS: Millis({ default: 1_200_000 }),
  BERTH_HEAVY_ADMISSION_POLL_MS: Millis({ default: 250 }),
  BERTH_SCAN_TIMEOUT_MS: Millis({ default: 120_000 }),
  BERTH_QUERY_DEADLINE_MS: Millis({ default: 300_000 }),
  BERTH_MAX_RESULT_BYTES: Bytes({ default: 256 * 1024 ** 2 }),
  BERTH_INGEST_MAX_DEPTH: Type.Integer({ minimum: 1, default: 64 }),
});
export type CoordinatorConfig = Static<typeof CoordinatorConfig>;

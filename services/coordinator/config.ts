/** The coordinator's configuration: the variables it reads, their defaults and their ranges (see docs/configuration.md). */
import { Type, type Static } from 'typebox';
import { Bytes, Host, Millis, Port, Settings } from '../common/config.js';
import { DEFAULT_S3_TIMEOUT_MS } from '../common/s3-client.js';
import { HEAVY_ADMISSION_DEFAULTS } from './admission/heavy-admission.js';
import { SERVING_ADMISSION_DEFAULTS } from './admission/serving-admission.js';
import { DEFAULT_RESULT_CACHE_BYTES } from './execution/result-cache.js';
import { DEFAULT_SCAN_TIMEOUT_MS } from './execution/scatter.js';
import { DEFAULT_MAX_INGEST_BYTES, DEFAULT_PUSH_TIMEOUT_MS } from './ingest/ingest.js';
import { DEFAULT_SHIPPER_MAX_BYTES } from './ingest/elastic-api.js';
import { DEFAULT_MAX_DEPTH } from './ingest/ndjson-rows.js';
import { DEFAULT_PLAN_CACHE_ENTRIES } from './planning/plan-cache.js';
import { DEFAULT_QUERY_LOG_SIZE } from './query-log.js';
import { DEFAULT_BROADCAST_LIMITS, DEFAULT_MAX_RESULT_BYTES, DEFAULT_QUERY_DEADLINE_MS } from './query-service.js';
import { POSTGRES_DEFAULTS } from './postgres/server.js';
import { DEFAULT_EXCHANGE_MEMORY_BYTES } from '../common/final-stage/engine.js';

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
  /** The PostgreSQL protocol's port, on BERTH_COORDINATOR_HOST. */
  BERTH_PG_PORT: Port(POSTGRES_DEFAULTS.port),
  /** PostgreSQL connections open at once, in all; past them a client is told 53300. */
  BERTH_PG_MAX_CONNECTIONS: Type.Integer({ minimum: 1, default: POSTGRES_DEFAULTS.maxConnections }),
  /** PostgreSQL connections open at once from one client address. */
  BERTH_PG_MAX_CONNECTIONS_PER_CLIENT: Type.Integer({ minimum: 1, default: POSTGRES_DEFAULTS.maxConnectionsPerClient }),
  /** A PEM certificate (chain) and its key, files: with both, PostgreSQL clients may ask for TLS. */
  BERTH_PG_TLS_CERT: Type.Optional(Type.String({ minLength: 1 })),
  BERTH_PG_TLS_KEY: Type.Optional(Type.String({ minLength: 1 })),
  /** A PostgreSQL connection with nothing running for this long is closed. */
  BERTH_PG_IDLE_TIMEOUT_MS: Millis({ default: POSTGRES_DEFAULTS.idleTimeoutMs }),
  /** Node URLs, comma-separated, to spread work over round-robin before the first member list. */
  BERTH_SEED_NODES: Type.Optional(Type.String()),
  BERTH_MAX_CONCURRENT_QUERIES: Type.Integer({ minimum: 1, default: SERVING_ADMISSION_DEFAULTS.maxConcurrency }),
  BERTH_MAX_QUEUED_QUERIES: Type.Integer({ minimum: 0, default: SERVING_ADMISSION_DEFAULTS.maxQueueSize }),
  BERTH_QUEUE_TIMEOUT_MS: Millis({ default: SERVING_ADMISSION_DEFAULTS.queueTimeoutMs }),
  /** 0 turns the plan cache off. */
  BERTH_PLAN_CACHE_SIZE: Type.Integer({ minimum: 0, default: DEFAULT_PLAN_CACHE_ENTRIES }),
  /** A join's small tables, after pruning, that each owner of its big one reads whole; 0 bytes: never. */
  BERTH_BROADCAST_MAX_BYTES: Type.Integer({ minimum: 0, default: DEFAULT_BROADCAST_LIMITS.bytes }),
  BERTH_BROADCAST_MAX_ROWS: Type.Integer({ minimum: 0, default: DEFAULT_BROADCAST_LIMITS.rows }),
  /** 0 (the default) turns the result cache off. */
  BERTH_RESULT_CACHE_BYTES: Type.Integer({ minimum: 0, default: DEFAULT_RESULT_CACHE_BYTES }),
  /** Threads of the DuckDB that runs final stages; unset: the machine's cores. */
  BERTH_DUCKDB_THREADS: Type.Optional(Type.Integer({ minimum: 1 })),
  /** 0 sends every scan-stage stream to a DuckDB table. */
  BERTH_EXCHANGE_MEMORY_BYTES: Type.Integer({ minimum: 0, default: DEFAULT_EXCHANGE_MEMORY_BYTES }),
  BERTH_QUERY_LOG_SIZE: Type.Integer({ minimum: 1, default: DEFAULT_QUERY_LOG_SIZE }),
  BERTH_HEAVY_QUEUE_TIMEOUT_MS: Millis({ default: HEAVY_ADMISSION_DEFAULTS.queueTimeoutMs }),
  BERTH_HEAVY_ADMISSION_POLL_MS: Millis({ default: HEAVY_ADMISSION_DEFAULTS.pollMs }),
  BERTH_SCAN_TIMEOUT_MS: Millis({ default: DEFAULT_SCAN_TIMEOUT_MS }),
  BERTH_QUERY_DEADLINE_MS: Millis({ default: DEFAULT_QUERY_DEADLINE_MS }),
  BERTH_MAX_RESULT_BYTES: Bytes({ default: DEFAULT_MAX_RESULT_BYTES }),
  BERTH_INGEST_MAX_DEPTH: Type.Integer({ minimum: 1, default: DEFAULT_MAX_DEPTH }),
  /** The largest batch one ingest call takes, as sent and as unpacked. */
  BERTH_INGEST_MAX_BYTES: Bytes({ default: DEFAULT_MAX_INGEST_BYTES }),
  /** Largest body of a log shipper's request (`_bulk`, OTLP /v1/logs), as sent and once decompressed. */
  BERTH_SHIPPER_MAX_BYTES: Bytes({ default: DEFAULT_SHIPPER_MAX_BYTES }),
  /** How long ingest's best-effort push to a segment's owner may hold its commit back. */
  BERTH_PUSH_TIMEOUT_MS: Millis({ default: DEFAULT_PUSH_TIMEOUT_MS }),
  /** The heavy pools' controller, for the console's Heavy pools view (as `berth pool status` reads it). */
  BERTH_CONTROLLER_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  /** The Temporal Web UI, for the console's links to the pools' workflows. */
  BERTH_TEMPORAL_UI_URL: Type.Optional(Type.String({ pattern: '^https?://' })),
  /** How long one S3 call may take, its retries included (ingest's put: past it, a 503). */
  BERTH_S3_TIMEOUT_MS: Millis({ default: DEFAULT_S3_TIMEOUT_MS }),
});
export type CoordinatorConfig = Static<typeof CoordinatorConfig>;

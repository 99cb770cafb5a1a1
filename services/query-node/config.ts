/** A query node's configuration: the variables it reads, their defaults and their ranges (see docs/configuration.md). */
import { Type, type Static } from 'typebox';
import {
  Bytes,
  DEFAULT_SERVING_GROUP,
  GroupSetting,
  Host,
  MemoryLimit,
  Millis,
  Port,
  Settings,
} from '../common/config.js';
import { HttpUrl } from '../common/schemas.js';

/** The disk cache's budget when none is given (services/query-node/segment-cache.ts). */
export const DEFAULT_CACHE_BYTES = 1024 ** 3;
/** The memory tier's budget when none is given (services/query-node/segment-memory.ts). */
export const DEFAULT_MEMORY_BYTES = 256 * 1024 ** 2;
/** How often the warmer fetches what the node owns and its cache lacks (services/query-node/warmer.ts). */
export const DEFAULT_WARM_INTERVAL_MS = 10_000;

export const QueryNodeConfig = Type.Object({
  ...Settings.common,
  ...Settings.s3,
  ...Settings.metaUrl,
  ...Settings.heartbeat,
  ...Settings.memberPoll,
  ...Settings.duckDbMemory,
  /** Identity and cache: keep it on a volume. @default DATA/node */
  BERTH_NODE_CACHE_DIR: Type.Optional(Type.String()),
  BERTH_NODE_CACHE_BYTES: Bytes({ default: DEFAULT_CACHE_BYTES }),
  /** The memory tier's budget (0: off). */
  BERTH_NODE_MEMORY_BYTES: Type.Integer({ minimum: 0, default: DEFAULT_MEMORY_BYTES }),
  BERTH_NODE_GROUP: GroupSetting({ default: DEFAULT_SERVING_GROUP }),
  BERTH_NODE_HOST: Host(),
  BERTH_NODE_PORT: Port(0),
  /** The URL peers use, when it is not the one the node listens on (in a container). */
  BERTH_NODE_ADVERTISE_URL: Type.Optional(HttpUrl()),
  /** The host peers use (Kubernetes: the pod IP); the URL is built with BERTH_NODE_PORT. */
  BERTH_NODE_ADVERTISE_HOST: Type.Optional(Type.String()),
  /** Declared weight; unset: from the CPU quota. */
  BERTH_NODE_VCPUS: Type.Optional(Type.Number({ exclusiveMinimum: 0 })),
  BERTH_WARM_INTERVAL_MS: Millis({ default: DEFAULT_WARM_INTERVAL_MS }),
  /** Unset: the node's vCPUs. */
  BERTH_DUCKDB_THREADS: Type.Optional(Type.Integer({ minimum: 1 })),
  /** The DuckDB of the heavy final stages a backend runs: its memory limit (unset: BERTH_DUCKDB_MEMORY_LIMIT's). */
  BERTH_FINAL_STAGE_MEMORY_LIMIT: Type.Optional(MemoryLimit()),
  /** …and the most it spills to the node's disk (unset: DuckDB's, 90 % of the disk's free space). */
  BERTH_FINAL_STAGE_TEMP_LIMIT: Type.Optional(Type.String()),
  /** The process's CPU priority as a nice value: above 0 yields the cores to the processes beside it. */
  BERTH_NODE_NICENESS: Type.Integer({ minimum: 0, maximum: 19, default: 0 }),
});
export type QueryNodeConfig = Static<typeof QueryNodeConfig>;

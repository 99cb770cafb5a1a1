/**
 * Reading a process's configuration from its environment. Each process declares one TypeBox schema
 * whose keys are the variables it reads (its `config.ts`); the defaults live there, once, and the
 * table in docs/configuration.md is checked against these schemas by a test. A value that does not
 * fit is refused at boot with an error that names the variable, before anything starts.
 */
import { Type, type Static, type TObject, type TProperties, type TSchema } from 'typebox';
import { Value } from 'typebox/value';
import { DEFAULT_VERDICT_THRESHOLDS } from '../../core/routing-verdict.js';
import { NODE_ID } from '../../core/identifiers.js';
import { TASK_QUEUE } from '../../workflows/contracts/shared.js';
import { POOL_DEFAULTS, type PoolConfig } from '../../workflows/contracts/heavy-pool.js';
import { SERVING_SCALER_DEFAULTS, type ServingScalerConfig } from '../../workflows/contracts/serving-scaler.js';

/** Thrown when an environment variable is missing or does not fit its process's configuration schema. */
export class ConfigError extends Error {
  override name = 'ConfigError';
}

/** Where a service listens unless told otherwise: loopback only. */
export const DEFAULT_HOST = '127.0.0.1';
/** The group that serves light queries, and that a query node joins unless told otherwise. */
export const DEFAULT_SERVING_GROUP = 'serving';
export const DEFAULT_LOG_LEVEL = 'info';
export const DEFAULT_TEMPORAL_NAMESPACE = 'default';
/** How often a query node heartbeats, and so how often meta expects it to. */
export const DEFAULT_HEARTBEAT_MS = 5_000;
/** How often a member view reads its group's member list. */
export const DEFAULT_MEMBER_POLL_MS = 10_000;

/** A duration or interval in milliseconds. */
export const Millis = (options: { minimum?: number; default?: number } = {}) =>
  Type.Integer({ minimum: 1, ...options });
/** A size in bytes. */
export const Bytes = (options: { default?: number } = {}) => Type.Integer({ minimum: 1, ...options });
/** A TCP port; 0 takes any free port. */
export const Port = (defaultPort: number) => Type.Integer({ minimum: 0, maximum: 65_535, default: defaultPort });
/** A compute group's name (the shape node ids have). */
export const GroupSetting = (options: { default?: string } = {}) =>
  Type.String({ pattern: NODE_ID.source, ...options });
/** DuckDB's memory limit: a size as DuckDB reads it ('2GB', '512 MiB') or a share of the memory available ('60%'). */
export const MemoryLimit = (options: { default?: string } = {}) =>
  Type.String({
    pattern: '^\\s*(0*[1-9]\\d*(\\.\\d+)?\\s*%|\\d+(\\.\\d+)?\\s*([KkMmGgTt]i?[Bb]?|[Bb]|bytes)?)\\s*$',
    ...options,
  });
export const Host = (defaultHost = DEFAULT_HOST) => Type.String({ minLength: 1, default: defaultHost });

/** What every service reads. BERTH_LOG_LEVEL is read by the logger of every app (tests build apps without a config); it is checked here. */
const CommonSettings = {
  BERTH_TOKEN: Type.String(),
  BERTH_DATA_DIR: Type.String({ minLength: 1, default: '.berth' }),
  BERTH_LOG_LEVEL: Type.Enum(['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'], {
    default: DEFAULT_LOG_LEVEL,
  }),
};

/** Where Berth's objects are; the credentials fall back to the AWS chain. */
const S3Settings = {
  BERTH_S3_ENDPOINT: Type.Optional(Type.String()),
  BERTH_S3_REGION: Type.Optional(Type.String()),
  BERTH_S3_ACCESS_KEY_ID: Type.Optional(Type.String()),
  BERTH_S3_SECRET_ACCESS_KEY: Type.Optional(Type.String()),
  BERTH_S3_BUCKET: Type.String({ minLength: 1, default: 'berth' }),
  /** A JSON file of named S3 endpoints and credentials, for the buckets of attached objects. */
  BERTH_S3_PROFILES_FILE: Type.Optional(Type.String({ minLength: 1 })),
};

const MetaUrlSettings = {
  /** One meta URL, or several comma-separated. */
  BERTH_META_URL: Type.String({ minLength: 1 }),
};

const TemporalSettings = {
  BERTH_TEMPORAL_ADDRESS: Type.String({ minLength: 1, default: '127.0.0.1:7233' }),
  BERTH_TEMPORAL_NAMESPACE: Type.String({ minLength: 1, default: DEFAULT_TEMPORAL_NAMESPACE }),
  BERTH_TASK_QUEUE: Type.String({ minLength: 1, default: TASK_QUEUE }),
};

/** The heavy pool's settings, read by every process that may start its workflow; no BERTH_HEAVY_GROUP, no pool. */
const HeavyPoolSettings = {
  BERTH_HEAVY_GROUP: Type.Optional(GroupSetting()),
  BERTH_HEAVY_INCREMENT: Type.Integer({ minimum: 1, default: POOL_DEFAULTS.increment }),
  BERTH_HEAVY_MAX_REPLICAS: Type.Integer({ minimum: 1, default: POOL_DEFAULTS.maxReplicas }),
  BERTH_HEAVY_IDLE_TIMEOUT_MS: Millis({ default: POOL_DEFAULTS.idleTimeoutMs }),
  BERTH_HEAVY_READINESS_WAIT_MS: Millis({ default: POOL_DEFAULTS.readinessWaitMs }),
  BERTH_HEAVY_READINESS_CONFIRM_MS: Millis({ minimum: 0, default: POOL_DEFAULTS.readinessConfirmMs }),
  BERTH_HEAVY_MONITOR_SUSTAIN_MS: Millis({ minimum: 0, default: POOL_DEFAULTS.monitorSustainMs }),
  BERTH_HEAVY_MAX_CONCURRENCY: Type.Integer({ minimum: 1, default: POOL_DEFAULTS.maxConcurrency }),
  BERTH_HEAVY_MAX_QUEUE_SIZE: Type.Integer({ minimum: 0, default: POOL_DEFAULTS.maxQueueSize }),
  BERTH_HEAVY_LAUNCH_DEADLINE_MS: Millis({ default: POOL_DEFAULTS.launchDeadlineMs }),
  BERTH_HEAVY_REPORT_TTL_MS: Millis({ default: POOL_DEFAULTS.reportTtlMs }),
  /**
   * The memory class: a second heavy group for memory-bound verdicts, scaled up rather than out
   * (one launch is one big backend). Unset: memory-bound verdicts go to BERTH_HEAVY_GROUP too.
   */
  BERTH_HEAVY_MEMORY_GROUP: Type.Optional(GroupSetting()),
  BERTH_HEAVY_MEMORY_MAX_REPLICAS: Type.Integer({ minimum: 1, default: 1 }),
  /** Memory-bound queries running at once on the memory class: they share its backend's memory. */
  BERTH_HEAVY_MEMORY_MAX_CONCURRENCY: Type.Integer({ minimum: 1, default: 2 }),
};

/** The serving group's autoscaler (opt-in), read by coordinators, the controller and workers. */
const ServingScalerSettings = {
  BERTH_SERVING_GROUP: GroupSetting({ default: DEFAULT_SERVING_GROUP }),
  BERTH_SERVING_AUTOSCALE: Type.Boolean({ default: false }),
  BERTH_SERVING_MIN_REPLICAS: Type.Integer({ minimum: 0, default: SERVING_SCALER_DEFAULTS.floor }),
  BERTH_SERVING_MAX_REPLICAS: Type.Integer({ minimum: 1, default: SERVING_SCALER_DEFAULTS.max }),
  BERTH_SERVING_WAITING_THRESHOLD: Type.Integer({ minimum: 0, default: SERVING_SCALER_DEFAULTS.waitingThreshold }),
  BERTH_SERVING_SUSTAIN_MS: Millis({ minimum: 0, default: SERVING_SCALER_DEFAULTS.sustainMs }),
  BERTH_SERVING_IDLE_MS: Millis({ default: SERVING_SCALER_DEFAULTS.idleMs }),
  BERTH_SERVING_REPORT_TTL_MS: Millis({ default: SERVING_SCALER_DEFAULTS.reportTtlMs }),
};

const HeartbeatSettings = { BERTH_HEARTBEAT_MS: Millis({ default: DEFAULT_HEARTBEAT_MS }) };
const MemberPollSettings = { BERTH_MEMBER_POLL_MS: Millis({ default: DEFAULT_MEMBER_POLL_MS }) };
/** DuckDB's memory limit per engine (e.g. 2GB or 40%); unset: a quarter of the memory available. */
const DuckDbMemorySettings = { BERTH_DUCKDB_MEMORY_LIMIT: Type.Optional(MemoryLimit()) };

/** The routing verdict's thresholds. */
const VerdictSettings = {
  BERTH_HEAVY_SCAN_BYTES: Bytes({ default: DEFAULT_VERDICT_THRESHOLDS.scanBytes }),
  BERTH_HEAVY_MEMORY_BYTES: Bytes({ default: DEFAULT_VERDICT_THRESHOLDS.memoryBytes }),
};

/** The groups of settings more than one process reads, each defined once; a process's config.ts spreads the ones it reads. */
export const Settings = {
  common: CommonSettings,
  s3: S3Settings,
  metaUrl: MetaUrlSettings,
  temporal: TemporalSettings,
  heavyPool: HeavyPoolSettings,
  servingScaler: ServingScalerSettings,
  heartbeat: HeartbeatSettings,
  memberPoll: MemberPollSettings,
  duckDbMemory: DuckDbMemorySettings,
  verdict: VerdictSettings,
};

export type HeavyPoolEnv = Static<TObject<typeof HeavyPoolSettings>>;
export type ServingScalerEnv = Static<TObject<typeof ServingScalerSettings>>;

/** The memory class's group, checked against the scan group's (every process that reads them checks the same). */
export function memoryGroupOf(env: {
  BERTH_HEAVY_GROUP?: string;
  BERTH_HEAVY_MEMORY_GROUP?: string;
}): string | undefined {
  const memoryGroup = env.BERTH_HEAVY_MEMORY_GROUP;
  if (memoryGroup && !env.BERTH_HEAVY_GROUP)
    throw new ConfigError('BERTH_HEAVY_MEMORY_GROUP needs BERTH_HEAVY_GROUP set too');
  if (memoryGroup && memoryGroup === env.BERTH_HEAVY_GROUP)
    throw new ConfigError(`BERTH_HEAVY_MEMORY_GROUP must differ from BERTH_HEAVY_GROUP, not both "${memoryGroup}"`);
  return memoryGroup;
}

/**
 * The heavy groups' configurations: `scan` (BERTH_HEAVY_GROUP, scaled out by its increment) and
 * `memory` (BERTH_HEAVY_MEMORY_GROUP, one backend per launch). Both share the pool's timings and
 * queue size; the memory class runs fewer queries at once, since they share its backend's memory.
 */
export function heavyPoolsOf(env: HeavyPoolEnv): { scan?: PoolConfig; memory?: PoolConfig } {
  const memoryGroup = memoryGroupOf(env);
  if (!env.BERTH_HEAVY_GROUP) return {};
  const shared = {
    idleTimeoutMs: env.BERTH_HEAVY_IDLE_TIMEOUT_MS,
    readinessWaitMs: env.BERTH_HEAVY_READINESS_WAIT_MS,
    readinessConfirmMs: env.BERTH_HEAVY_READINESS_CONFIRM_MS,
    monitorSustainMs: env.BERTH_HEAVY_MONITOR_SUSTAIN_MS,
    maxConcurrency: env.BERTH_HEAVY_MAX_CONCURRENCY,
    maxQueueSize: env.BERTH_HEAVY_MAX_QUEUE_SIZE,
    launchDeadlineMs: env.BERTH_HEAVY_LAUNCH_DEADLINE_MS,
    reportTtlMs: env.BERTH_HEAVY_REPORT_TTL_MS,
  };
  return {
    scan: {
      group: env.BERTH_HEAVY_GROUP,
      increment: env.BERTH_HEAVY_INCREMENT,
      maxReplicas: env.BERTH_HEAVY_MAX_REPLICAS,
      ...shared,
      bottleneck: 'scan',
    },
    memory: memoryGroup
      ? {
          group: memoryGroup,
          increment: 1,
          maxReplicas: env.BERTH_HEAVY_MEMORY_MAX_REPLICAS,
          ...shared,
          maxConcurrency: env.BERTH_HEAVY_MEMORY_MAX_CONCURRENCY,
          bottleneck: 'memory',
        }
      : undefined,
  };
}

/** The serving autoscaler's configuration; undefined unless BERTH_SERVING_AUTOSCALE is on. */
export function servingScalerConfigOf(env: ServingScalerEnv): ServingScalerConfig | undefined {
  if (!env.BERTH_SERVING_AUTOSCALE) return undefined;
  return {
    group: env.BERTH_SERVING_GROUP,
    floor: env.BERTH_SERVING_MIN_REPLICAS,
    max: env.BERTH_SERVING_MAX_REPLICAS,
    waitingThreshold: env.BERTH_SERVING_WAITING_THRESHOLD,
    sustainMs: env.BERTH_SERVING_SUSTAIN_MS,
    idleMs: env.BERTH_SERVING_IDLE_MS,
    reportTtlMs: env.BERTH_SERVING_REPORT_TTL_MS,
  };
}

/**
 * The process's configuration from `env`, with defaults filled in. Empty variables count as unset.
 * Numbers are parsed whole (TypeBox's own conversion would truncate "2.5" to 2, hiding the mistake).
 */
export function parseConfig<T extends TObject>(schema: T, env: NodeJS.ProcessEnv = process.env): Static<T> {
  const properties: TProperties = schema.properties;
  const values: Record<string, unknown> = {};
  for (const [name, property] of Object.entries(properties)) {
    const raw = env[name];
    if (raw !== undefined && raw !== '') values[name] = coerce(property, raw);
  }
  Value.Default(schema, values);
  const problems = new Map<string, string>();
  for (const error of Value.Errors(schema, values)) {
    if (error.keyword === 'required') {
      for (const name of (error.params as { requiredProperties: string[] }).requiredProperties)
        problems.set(name, `${name} must be set`);
      continue;
    }
    const name = error.instancePath.slice(1);
    if (!problems.has(name))
      problems.set(
        name,
        `${name} ${describe(error.keyword, error.params as Record<string, unknown>, properties[name]!)}, not "${env[name]}"`,
      );
  }
  if (problems.size > 0) throw new ConfigError([...problems.values()].join('; '));
  return values as Static<T>;
}

/** `parseConfig` at a process's boot: a configuration error is printed and the process exits with EX_CONFIG. */
export function loadConfig<T extends TObject>(schema: T): Static<T> {
  return atBoot(() => parseConfig(schema));
}

/** Reads configuration at a process's boot: a ConfigError is printed and the process exits with EX_CONFIG. */
export function atBoot<T>(read: () => T): T {
  try {
    return read();
  } catch (error) {
    if (!(error instanceof ConfigError)) throw error;
    process.stderr.write(`${error.message}\n`);
    process.exit(78); // EX_CONFIG
  }
}

function coerce(schema: TSchema, raw: string): unknown {
  const type = (schema as { type?: string }).type;
  if (type === 'integer' || type === 'number')
    return raw.trim() !== '' && Number.isFinite(Number(raw)) ? Number(raw) : raw;
  if (type === 'boolean') return { '1': true, true: true, '0': false, false: false }[raw.trim().toLowerCase()] ?? raw;
  return raw;
}

function describe(keyword: string, params: Record<string, unknown>, schema: TSchema): string {
  const type = (schema as { type?: string }).type;
  switch (keyword) {
    case 'type':
      return type === 'integer'
        ? 'must be a whole number'
        : type === 'boolean'
          ? 'must be 1, 0, true or false'
          : `must be a ${type}`;
    case 'minimum':
      return `must be at least ${params.limit as number}`;
    case 'maximum':
      return `must be at most ${params.limit as number}`;
    case 'exclusiveMinimum':
      return `must be more than ${params.limit as number}`;
    case 'enum':
      return `must be one of ${(params.allowedValues as string[]).join(', ')}`;
    case 'minLength':
      return 'must not be empty';
    case 'pattern':
      return `must match ${params.pattern as string}`;
    default:
      return `is not valid (${keyword})`;
  }
}

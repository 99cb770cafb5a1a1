/**
 * One way to build the S3 client, so that tests, the embedded cluster and production share it. Every
 * call it makes is bounded: each attempt must connect, and then must never go silent, within a third
 * of the S3 timeout, and the SDK's standard retries (three attempts) fit inside it; a call that also
 * needs a hard deadline (ingest's put) passes `s3Deadline(config)` as its abort signal.
 */
import { readFileSync } from 'node:fs';
import { S3Client } from '@aws-sdk/client-s3';
import { Type, type Static } from 'typebox';
import { Value } from 'typebox/value';

export interface S3Credentials {
  accessKeyId: string;
  secretAccessKey: string;
}

export interface S3Config {
  /** Custom endpoint (SeaweedFS, MinIO, any S3 API); AWS S3 when undefined. */
  endpoint?: string;
  /** @default 'us-east-1' */
  region?: string;
  /** Static credentials; the AWS default provider chain when undefined. */
  credentials?: S3Credentials;
  /**
   * How long one S3 call may take, its retries included (BERTH_S3_TIMEOUT_MS): each of its attempts
   * gets a third, to connect and as the longest silence while it sends or reads.
   * @default DEFAULT_S3_TIMEOUT_MS
   */
  timeoutMs?: number;
  /** Named S3 endpoints for the buckets of attached objects (BERTH_S3_PROFILES_FILE). */
  profiles?: S3Profiles;
}

/** BERTH_S3_PROFILES_FILE: named S3 endpoints and credentials for buckets of attached objects. */
export const S3Profiles = Type.Record(
  Type.String({ pattern: '^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$' }),
  Type.Object(
    {
      endpoint: Type.Optional(Type.String({ minLength: 1 })),
      region: Type.Optional(Type.String({ minLength: 1 })),
      accessKeyId: Type.Optional(Type.String({ minLength: 1 })),
      secretAccessKey: Type.Optional(Type.String({ minLength: 1 })),
    },
    { additionalProperties: false },
  ),
);
export type S3Profiles = Static<typeof S3Profiles>;

/** Reads a profiles file; a file that is not one fails the process's start with what is wrong. */
export function readS3Profiles(file: string | undefined): S3Profiles {
  if (!file) return {};
  let parsed: unknown;
  try {
    parsed = JSON.parse(readFileSync(file, 'utf8'));
  } catch (error) {
    throw new Error(`BERTH_S3_PROFILES_FILE ${file} is not a JSON file: ${(error as Error).message}`);
  }
  const error = Value.Errors(S3Profiles, parsed)[0];
  if (error) throw new Error(`BERTH_S3_PROFILES_FILE ${file}: ${error.instancePath || '/'} ${error.message}`);
  return parsed as S3Profiles;
}

/** BERTH_S3_TIMEOUT_MS's default, for processes whose configuration does not set it. */
export const DEFAULT_S3_TIMEOUT_MS = 30_000;

/** Attempts per S3 call: the SDK's standard retry strategy's own default, stated. */
const S3_ATTEMPTS = 3;

export function createS3Client(config: S3Config): S3Client {
  const attemptMs = Math.max(Math.ceil(s3TimeoutOf(config) / S3_ATTEMPTS), 1);
  return new S3Client({
    endpoint: config.endpoint,
    region: config.region ?? 'us-east-1',
    credentials: config.credentials,
    // SeaweedFS and MinIO serve buckets by path, not by virtual host.
    forcePathStyle: config.endpoint !== undefined,
    maxAttempts: S3_ATTEMPTS,
    // A silent socket (an S3 frozen, a network partitioned) fails its attempt, which is retried;
    // a large object that keeps moving is never cut short by these.
    requestHandler: { connectionTimeout: attemptMs, socketTimeout: attemptMs },
  });
}

/** The S3 timeout `config` sets, or the default. */
export const s3TimeoutOf = (config: S3Config): number => config.timeoutMs ?? DEFAULT_S3_TIMEOUT_MS;

/** An abort signal for one S3 call whose whole time, retries included, must fit the S3 timeout. */
export const s3Deadline = (config: S3Config): AbortSignal => AbortSignal.timeout(s3TimeoutOf(config));

/** The S3 variables of a process's configuration (see S3Settings in config.ts). */
export type S3Env = Partial<
  Record<
    | 'BERTH_S3_ENDPOINT'
    | 'BERTH_S3_REGION'
    | 'BERTH_S3_ACCESS_KEY_ID'
    | 'BERTH_S3_SECRET_ACCESS_KEY'
    | 'BERTH_S3_PROFILES_FILE',
    string
  >
> & {
  /** Read by the processes whose schema has it (the coordinator's); the others take the default. */
  BERTH_S3_TIMEOUT_MS?: number;
};

/** BERTH_S3_ENDPOINT, BERTH_S3_REGION, BERTH_S3_ACCESS_KEY_ID, BERTH_S3_SECRET_ACCESS_KEY, BERTH_S3_TIMEOUT_MS and BERTH_S3_PROFILES_FILE. */
export function s3ConfigFromEnv(env: S3Env): S3Config {
  const {
    BERTH_S3_ENDPOINT: endpoint,
    BERTH_S3_REGION: region,
    BERTH_S3_ACCESS_KEY_ID: accessKeyId,
    BERTH_S3_SECRET_ACCESS_KEY: secretAccessKey,
    BERTH_S3_TIMEOUT_MS: timeoutMs,
    BERTH_S3_PROFILES_FILE: profilesFile,
  } = env;
  return {
    endpoint: endpoint || undefined,
    region: region || undefined,
    credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
    ...(timeoutMs ? { timeoutMs } : {}),
    ...(profilesFile ? { profiles: readS3Profiles(profilesFile) } : {}),
  };
}

/**
 * One way to build the S3 client, so that tests, the embedded cluster and production share it. Every
 * call it makes is bounded: each attempt must connect, and then must never go silent, within a third
 * of the S3 timeout, and the SDK's standard retries (three attempts) fit inside it; a call that also
 * needs a hard deadline (ingest's put) passes `s3Deadline(config)` as its abort signal.
 */
import { S3Client } from '@aws-sdk/client-s3';

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
  Record<'BERTH_S3_ENDPOINT' | 'BERTH_S3_REGION' | 'BERTH_S3_ACCESS_KEY_ID' | 'BERTH_S3_SECRET_ACCESS_KEY', string>
> & {
  /** Read by the processes whose schema has it (the coordinator's); the others take the default. */
  BERTH_S3_TIMEOUT_MS?: number;
};

/** BERTH_S3_ENDPOINT, BERTH_S3_REGION, BERTH_S3_ACCESS_KEY_ID, BERTH_S3_SECRET_ACCESS_KEY and BERTH_S3_TIMEOUT_MS. */
export function s3ConfigFromEnv(env: S3Env): S3Config {
  const {
    BERTH_S3_ENDPOINT: endpoint,
    BERTH_S3_REGION: region,
    BERTH_S3_ACCESS_KEY_ID: accessKeyId,
    BERTH_S3_SECRET_ACCESS_KEY: secretAccessKey,
    BERTH_S3_TIMEOUT_MS: timeoutMs,
  } = env;
  return {
    endpoint: endpoint || undefined,
    region: region || undefined,
    credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
    ...(timeoutMs ? { timeoutMs } : {}),
  };
}

/** One way to build the S3 client, so that tests, the embedded cluster and production share it. */
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
}

export function createS3Client(config: S3Config): S3Client {
  return new S3Client({
    endpoint: config.endpoint,
    region: config.region ?? 'us-east-1',
    credentials: config.credentials,
    // SeaweedFS and MinIO serve buckets by path, not by virtual host.
    forcePathStyle: config.endpoint !== undefined,
  });
}

/** The S3 variables of a process's configuration (see S3Settings in config.ts). */
export type S3Env = Partial<
  Record<'BERTH_S3_ENDPOINT' | 'BERTH_S3_REGION' | 'BERTH_S3_ACCESS_KEY_ID' | 'BERTH_S3_SECRET_ACCESS_KEY', string>
>;

/** BERTH_S3_ENDPOINT, BERTH_S3_REGION, BERTH_S3_ACCESS_KEY_ID and BERTH_S3_SECRET_ACCESS_KEY. */
export function s3ConfigFromEnv(env: S3Env): S3Config {
  const {
    BERTH_S3_ENDPOINT: endpoint,
    BERTH_S3_REGION: region,
    BERTH_S3_ACCESS_KEY_ID: accessKeyId,
    BERTH_S3_SECRET_ACCESS_KEY: secretAccessKey,
  } = env;
  return {
    endpoint: endpoint || undefined,
    region: region || undefined,
    credentials: accessKeyId && secretAccessKey ? { accessKeyId, secretAccessKey } : undefined,
  };
}

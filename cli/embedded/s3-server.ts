/** The embedded S3 API: s3rver on loopback, spoken to with the same @aws-sdk/client-s3 code as S3. */
import S3rver from 's3rver';

export interface S3ServerOptions {
  /** Where objects are kept on disk. */
  directory: string;
  /** Buckets created at start (existing ones are kept). */
  buckets: string[];
  /** @default '127.0.0.1' */
  address?: string;
  /** @default a free port */
  port?: number;
}

export interface S3Server {
  endpoint: string;
  stop(): Promise<void>;
}

export async function startS3Server(options: S3ServerOptions): Promise<S3Server> {
  const server = new S3rver({
    address: options.address ?? '127.0.0.1',
    port: options.port ?? 0,
    directory: options.directory,
    silent: true,
    configureBuckets: options.buckets.map((name) => ({ name, configs: [] })),
  });
  const { address, port } = await server.run();
  return { endpoint: `http://${address}:${port}`, stop: () => server.close() };
}

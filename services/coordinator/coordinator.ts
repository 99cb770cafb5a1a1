/** Composes a running coordinator: SQL engine, planner, member view, scatter, ingest, HTTP. */
import path from 'node:path';
import type { VerdictThresholds } from '../../core/routing-verdict.js';
import { MemberView } from '../common/member-view.js';
import { createS3Client, type S3Config } from '../common/s3-client.js';
import { MetaClient } from '../meta/client.js';
import { buildCoordinatorApp } from './app.js';
import { Ingestor } from './ingest.js';
import { Planner } from './planner.js';
import { QueryService } from './query-service.js';
import { Scatter } from './scatter.js';
import { SqlEngine } from './sql-engine.js';

export interface CoordinatorConfig {
  /** Scratch space for partial results and ingest batches (emptied at start). */
  workDir: string;
  metaUrl: string;
  token: string;
  s3: S3Config;
  bucket: string;
  /** @default 'serving' */
  group?: string;
  /** Query node URLs to spread work over round-robin before any member list arrives. */
  seedNodes?: string[];
  /** @default 10000 */
  memberPollMs?: number;
  /** @default 16 */
  maxConcurrency?: number;
  /** When a query is heavy. @default DEFAULT_VERDICT_THRESHOLDS */
  verdictThresholds?: VerdictThresholds;
  /** @default '127.0.0.1' */
  host?: string;
  /** @default 0 (any free port) */
  port?: number;
  /** @default 120000 */
  scanTimeoutMs?: number;
  /** Largest NDJSON batch one ingest call takes. @default 256 MiB */
  maxIngestBytes?: number;
  /** @default true */
  logger?: boolean;
}

export interface RunningCoordinator {
  url: string;
  view: MemberView;
  queries: QueryService;
  close(): Promise<void>;
}

export async function startCoordinator(config: CoordinatorConfig): Promise<RunningCoordinator> {
  const engine = await SqlEngine.open(path.join(config.workDir, 'scratch'));
  const meta = new MetaClient(config.metaUrl, config.token);
  const view = new MemberView({ meta, group: config.group ?? 'serving', pollMs: config.memberPollMs });
  const s3 = createS3Client(config.s3);
  const queries = new QueryService({
    planner: new Planner(engine, (name) => meta.findTable(name)),
    engine,
    scatter: new Scatter({ view, seedNodes: config.seedNodes ?? [], token: config.token, scanTimeoutMs: config.scanTimeoutMs }),
    meta,
    group: config.group,
    maxConcurrency: config.maxConcurrency,
    verdictThresholds: config.verdictThresholds,
  });
  const ingestor = new Ingestor({ engine, meta, view, s3, bucket: config.bucket, token: config.token });
  const app = buildCoordinatorApp({ queries, ingestor, meta, view, token: config.token, maxIngestBytes: config.maxIngestBytes, logger: config.logger });
  const url = await app.listen({ host: config.host ?? '127.0.0.1', port: config.port ?? 0 });
  view.start();
  return {
    url,
    view,
    queries,
    close: async () => {
      view.stop();
      await app.close();
      engine.close();
      s3.destroy();
    },
  };
}

/**
 * Ingest figures per path on the coordinator's /metrics: rows committed, body bytes received, rows not
 * committed (refused as bad, or failed and to be sent again), and how long a request took to be
 * committed. Every path's series exist from the start, at zero, so a dashboard charts each at once.
 */
import { Counter, Histogram, type Registry } from 'prom-client';

/** The rows a request did not commit: `invalid` ones never will as they are, `retryable` ones may when sent again. */
export type IngestErrorKind = 'invalid' | 'retryable';

export class IngestMetrics {
  private readonly rows: Counter<'path'>;
  private readonly bytes: Counter<'path'>;
  private readonly errors: Counter<'path' | 'kind'>;
  private readonly failures: Counter<'path' | 'kind'>;
  private readonly commitSeconds: Histogram<'path'>;

  constructor(registry: Registry, paths: readonly string[]) {
    const registers = [registry];
    this.rows = new Counter({
      name: 'berth_ingest_rows_total',
      help: 'Rows committed, by ingest path',
      labelNames: ['path'],
      registers,
    });
    this.bytes = new Counter({
      name: 'berth_ingest_bytes_total',
      help: 'Request body bytes received (after decompression), by ingest path',
      labelNames: ['path'],
      registers,
    });
    this.errors = new Counter({
      name: 'berth_ingest_errors_total',
      help: 'Rows not committed, by ingest path: invalid (refused as sent) or retryable (failed; sent again they may commit)',
      labelNames: ['path', 'kind'],
      registers,
    });
    this.failures = new Counter({
      name: 'berth_ingest_failed_requests_total',
      help: 'Requests that committed nothing, by ingest path: invalid (refused as sent) or retryable (sent again they may commit)',
      labelNames: ['path', 'kind'],
      registers,
    });
    this.commitSeconds = new Histogram({
      name: 'berth_ingest_commit_seconds',
      help: 'Time from a request arriving to its rows committed (when they are queryable), by ingest path',
      labelNames: ['path'],
      buckets: [0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60],
      registers,
    });
    for (const path of paths) {
      this.rows.inc({ path }, 0);
      this.bytes.inc({ path }, 0);
      for (const kind of ['invalid', 'retryable'] as const) {
        this.errors.inc({ path, kind }, 0);
        this.failures.inc({ path, kind }, 0);
      }
      this.commitSeconds.zero({ path });
    }
  }

  received(path: string, bytes: number): void {
    this.bytes.inc({ path }, bytes);
  }

  /** A request's rows committed, `startedAt` being its arrival (performance.now()). */
  committed(path: string, rows: number, startedAt: number): void {
    this.rows.inc({ path }, rows);
    this.commitSeconds.observe({ path }, (performance.now() - startedAt) / 1000);
  }

  notCommitted(path: string, kind: IngestErrorKind, rows: number): void {
    if (rows > 0) this.errors.inc({ path, kind }, rows);
  }

  /** A request that committed nothing: a batch refused whole, or one that failed before its rows were read. */
  failed(path: string, kind: IngestErrorKind): void {
    this.failures.inc({ path, kind });
  }
}

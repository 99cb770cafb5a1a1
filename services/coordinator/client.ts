/** Calls the coordinator: queries, ingest of NDJSON rows, the node list and the query log's compute concentration. */
import { callJson } from '../common/http-client.js';
import type { ConcentrationReport, IngestResult, NodeRow, QueryResult } from './api.js';

export type { ConcentrationReport, IngestResult, NodeRow, QueryResult };

/** A query or an ingest runs as long as the coordinator lets it (its deadline governs). */
const DATA_TIMEOUT_MS = 3_600_000;

export class CoordinatorClient {
  constructor(
    readonly url: string,
    /** Needed for ingest only. */
    private readonly token?: string,
  ) {}

  query(sql: string): Promise<QueryResult> {
    return callJson(`${this.url}/v1/query`, { body: { sql }, timeoutMs: DATA_TIMEOUT_MS });
  }

  /** Ingests NDJSON rows into `table` (created on first ingest, timestamps in `timestampColumn`). */
  ingest(table: string, ndjson: string, options: { timestampColumn?: string } = {}): Promise<IngestResult> {
    const query = options.timestampColumn ? `?timestampColumn=${encodeURIComponent(options.timestampColumn)}` : '';
    return callJson(`${this.url}/v1/tables/${encodeURIComponent(table)}/rows${query}`, {
      body: ndjson,
      contentType: 'application/x-ndjson',
      token: this.token,
      timeoutMs: DATA_TIMEOUT_MS,
    });
  }

  async nodes(): Promise<NodeRow[]> {
    return (await callJson<{ nodes: NodeRow[] }>(`${this.url}/v1/nodes`, { timeoutMs: 30_000 })).nodes;
  }

  /** Over the queries logged since `since` (ms since the epoch). */
  concentration(since: number): Promise<ConcentrationReport> {
    return callJson(`${this.url}/v1/query-log/concentration?since=${since}`, { timeoutMs: 30_000 });
  }
}

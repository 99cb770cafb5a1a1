/** Calls the coordinator: queries, ingest of NDJSON rows, tables, the node list, workload groups and the query log. */
import { Readable } from 'node:stream';
import type { ReadableStream as WebReadableStream } from 'node:stream/web';
import { callJson, ServiceCallError } from '../common/http-client.js';
import {
  NDJSON_TYPE,
  type ConcentrationReport,
  type IngestResult,
  type NodeRow,
  type QueryResult,
  type TableDetails,
  type TableDropped,
  type DeleteRequested,
  type AttachRequest,
  type AttachResult,
  type RecentQueries,
  type SegmentDays,
  type WorkloadGroupStatus,
} from './api.js';
import type { TableInfo } from '../meta/api.js';

export type {
  ConcentrationReport,
  IngestResult,
  NodeRow,
  QueryResult,
  RecentQueries,
  SegmentDays,
  WorkloadGroupStatus,
};

/** A query or an ingest runs as long as the coordinator lets it (its deadline governs). */
const DATA_TIMEOUT_MS = 3_600_000;

export class CoordinatorClient {
  constructor(
    readonly url: string,
    /** Needed for ingest, table changes and the recent queries. */
    private readonly token?: string,
  ) {}

  /** `signal` abandons the query: the coordinator stops it on every node when the call goes away. */
  query(sql: string, signal?: AbortSignal): Promise<QueryResult> {
    return callJson(`${this.url}/v1/query`, { body: { sql }, timeoutMs: DATA_TIMEOUT_MS, signal });
  }

  /**
   * The answer as NDJSON lines, as the coordinator makes them (streamed-answer.ts): the columns,
   * one line per row, then the stats, or an error line when the query failed after its first
   * line. No cap on its size. An error before the first line throws, as query() does.
   */
  async queryNdjson(sql: string): Promise<Readable> {
    const url = `${this.url}/v1/query`;
    const response = await fetch(url, {
      method: 'POST',
      headers: { 'content-type': 'application/json', accept: NDJSON_TYPE },
      body: JSON.stringify({ sql }),
      signal: AbortSignal.timeout(DATA_TIMEOUT_MS),
    });
    if (!response.ok || !response.body) {
      const text = await response.text();
      const body = (text.startsWith('{') ? JSON.parse(text) : undefined) as { error?: string; message?: string };
      throw new ServiceCallError(response.status, body, `${url} answered ${response.status}: ${body?.message ?? text}`);
    }
    return Readable.fromWeb(response.body as WebReadableStream<Uint8Array>);
  }

  /**
   * Ingests a batch of rows into `table` (created on first ingest, timestamps in
   * `timestampColumn`, or none): NDJSON text, or bytes of the `contentType` given (Parquet).
   */
  ingest(
    table: string,
    rows: string | Buffer,
    options: { timestampColumn?: string; noTimestamp?: boolean; contentType?: string } = {},
  ): Promise<IngestResult> {
    const query = options.noTimestamp
      ? '?noTimestamp=true'
      : options.timestampColumn
        ? `?timestampColumn=${encodeURIComponent(options.timestampColumn)}`
        : '';
    return callJson(`${this.url}/v1/tables/${encodeURIComponent(table)}/rows${query}`, {
      body: rows,
      contentType: options.contentType ?? 'application/x-ndjson',
      token: this.token,
      timeoutMs: DATA_TIMEOUT_MS,
    });
  }

  /** Attaches one page of Parquet objects in a bucket as segments of `table` (see AttachRequest). */
  attach(
    table: string,
    request: AttachRequest,
    options: { timestampColumn?: string; noTimestamp?: boolean } = {},
  ): Promise<AttachResult> {
    const query = options.noTimestamp
      ? '?noTimestamp=true'
      : options.timestampColumn
        ? `?timestampColumn=${encodeURIComponent(options.timestampColumn)}`
        : '';
    return callJson(`${this.url}/v1/tables/${encodeURIComponent(table)}/attach${query}`, {
      body: request,
      token: this.token,
      timeoutMs: DATA_TIMEOUT_MS,
    });
  }

  /** Sets how long a table's rows are kept (ms of age), or with null keeps them for good. */
  async setRetention(table: string, retentionMs: number | null): Promise<void> {
    await callJson(`${this.url}/v1/tables/${encodeURIComponent(table)}/retention`, {
      ...(retentionMs === null ? { method: 'DELETE' } : { method: 'PUT', body: { retentionMs } }),
      token: this.token,
      timeoutMs: 30_000,
    });
  }

  /** Drops the table (see TableDropped): gone from queries at once, its segments retired by its drop workflow. */
  dropTable(table: string): Promise<TableDropped> {
    return callJson(`${this.url}/v1/tables/${encodeURIComponent(table)}`, {
      method: 'DELETE',
      token: this.token,
      timeoutMs: 30_000,
    });
  }

  /** Records a delete of the rows `where` holds true for (see DeleteRequest); its workflow removes them. */
  requestDelete(table: string, where: string): Promise<DeleteRequested> {
    return callJson(`${this.url}/v1/tables/${encodeURIComponent(table)}/deletes`, {
      body: { where },
      token: this.token,
      timeoutMs: 30_000,
    });
  }

  async tables(): Promise<TableInfo[]> {
    return (await callJson<{ tables: TableInfo[] }>(`${this.url}/v1/tables`, { timeoutMs: 30_000 })).tables;
  }

  /** A table's columns, schema version, retention and segments; a 404 for a table that does not exist. */
  table(name: string): Promise<TableDetails> {
    return callJson(`${this.url}/v1/tables/${encodeURIComponent(name)}`, { timeoutMs: 30_000 });
  }

  /** A table's active segments by the UTC day of their oldest row. */
  tableDays(name: string): Promise<SegmentDays> {
    return callJson(`${this.url}/v1/tables/${encodeURIComponent(name)}/days`, { timeoutMs: 30_000 });
  }

  /** Each workload group's running and waiting queries and its limits (SHOW WORKLOAD GROUPS). */
  async workloadGroups(): Promise<WorkloadGroupStatus[]> {
    return (await callJson<{ groups: WorkloadGroupStatus[] }>(`${this.url}/v1/workload-groups`, { timeoutMs: 30_000 }))
      .groups;
  }

  async nodes(): Promise<NodeRow[]> {
    return (await callJson<{ nodes: NodeRow[] }>(`${this.url}/v1/nodes`, { timeoutMs: 30_000 })).nodes;
  }

  /** The last queries answered or refused, newest first, with their SQL (needs the token). */
  recentQueries(): Promise<RecentQueries> {
    return callJson(`${this.url}/v1/query-log/recent`, { token: this.token, timeoutMs: 30_000 });
  }

  /** Over the queries logged since `since` (ms since the epoch). */
  concentration(since: number): Promise<ConcentrationReport> {
    return callJson(`${this.url}/v1/query-log/concentration?since=${since}`, { timeoutMs: 30_000 });
  }
}

/**
 * A typed client for one query node: scans (an Arrow IPC stream back, stats and errors in
 * trailers), pushes of segment files, warm-up passes, the canary and the node's info. The coordinator's scatter
 * and ingest, the merge's push, the heavy pool's readiness check and the benches call nodes
 * through it; the shapes it sends and reads are the node's api.ts.
 */
import http from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { bearer } from '../common/auth.js';
import { callJson, ServiceCallError } from '../common/http-client.js';
import type { ErrorBody } from '../common/schemas.js';
import {
  SCAN_ERROR_TRAILER,
  SCAN_STATS_TRAILER,
  type CanaryResult,
  type NodeInfo,
  type PushResult,
  type ScanFailure,
  type ScanRequest,
  type ScanStats,
  type WarmResult,
  type Warmth,
} from './api.js';

export type { CanaryResult, NodeInfo, PushResult, ScanRequest, ScanStats, Warmth };

/** A scan under way: its rows as an Arrow IPC stream, and how it ended once they are read. */
export interface ScanResponse {
  body: Readable;
  /** Resolves with the node's stats once the body has ended; rejects when the scan was cut short. */
  ended: Promise<ScanStats>;
}

/** Connections to query nodes stay open between scans. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

export class QueryNodeClient {
  constructor(
    readonly url: string,
    /** Needed for scans, pushes and the canary. */
    private readonly token = '',
  ) {}

  /**
   * Starts a scan. A non-2xx answer, or a stream the node ended with an error trailer, is a
   * ServiceCallError with the node's status and message; a dropped connection is an Error. The
   * signal abandons it, and the node then interrupts DuckDB.
   */
  scan(request: ScanRequest, signal: AbortSignal): Promise<ScanResponse> {
    return new Promise((resolve, reject) => {
      const payload = JSON.stringify(request);
      const call = http.request(`${this.url}/v1/scan`, {
        method: 'POST',
        agent,
        signal,
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          ...bearer(this.token),
        },
      });
      call.once('error', reject);
      call.once('response', (response) => {
        if (response.statusCode !== 200) {
          const parts: Buffer[] = [];
          response.on('data', (part: Buffer) => parts.push(part));
          response.once('error', reject);
          response.once('end', () => {
            const text = Buffer.concat(parts).toString();
            let body: ErrorBody | undefined;
            try {
              body = JSON.parse(text) as typeof body;
            } catch {
              body = undefined;
            }
            reject(
              new ServiceCallError(
                response.statusCode ?? 502,
                body,
                `scan on ${this.url} answered ${response.statusCode}: ${body?.message ?? text}`,
              ),
            );
          });
          return;
        }
        const body = new PassThrough();
        // The trailers are there once the message is complete.
        const ended = new Promise<ScanStats>((done, fail) => {
          const settle = () => {
            if (!response.complete) {
              const error = new Error(`scan on ${this.url}: the connection dropped mid-stream`);
              fail(error);
              body.destroy(error);
              return;
            }
            const failure = response.trailers[SCAN_ERROR_TRAILER];
            if (failure) {
              const { status, error, message } = JSON.parse(failure) as ScanFailure;
              fail(new ServiceCallError(status, { error, message }, `scan on ${this.url} failed: ${message}`));
            } else done(JSON.parse(response.trailers[SCAN_STATS_TRAILER] ?? '{}') as ScanStats);
          };
          response.once('end', settle);
          response.once('close', settle);
        });
        ended.catch(() => {});
        response.pipe(body);
        // The Arrow reader closes the body at the stream's end marker: read the rest of the message
        // (nothing, or the chunked encoding's end) so that it ends, its trailers arrive and the connection is reused.
        body.once('close', () => {
          response.unpipe(body);
          response.resume();
        });
        resolve({ body, ended });
      });
      call.end(payload);
    });
  }

  /** Pushes a segment file into the node's cache; `signal` (a cancelled activity) aborts the request. */
  async push(
    table: string,
    segmentId: string,
    body: Buffer,
    options: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<PushResult> {
    const timeout = AbortSignal.timeout(options.timeoutMs ?? 60_000);
    const response = await fetch(
      `${this.url}/v1/segments/${encodeURIComponent(segmentId)}?table=${encodeURIComponent(table)}`,
      {
        method: 'POST',
        headers: { 'content-type': 'application/octet-stream', ...bearer(this.token) },
        body,
        signal: options.signal ? AbortSignal.any([options.signal, timeout]) : timeout,
      },
    );
    const result = (await response.json()) as PushResult & Partial<ErrorBody>;
    if (!response.ok)
      throw new ServiceCallError(
        response.status,
        result,
        `push to ${this.url} answered ${response.status}: ${result.message}`,
      );
    return result;
  }

  /** Asks the node to read Berth's canary object from storage and scan it. */
  canary(timeoutMs = 60_000): Promise<CanaryResult> {
    return callJson<CanaryResult>(`${this.url}/v1/canary`, { method: 'POST', token: this.token, timeoutMs });
  }

  /** Runs one warmer pass now, fetching at most `segments` (0: only survey what the node owns); returns how many it fetched. */
  async warm(segments?: number): Promise<number> {
    const query = segments === undefined ? '' : `?segments=${segments}`;
    return (
      await callJson<WarmResult>(`${this.url}/v1/warm${query}`, {
        method: 'POST',
        token: this.token,
        timeoutMs: 60_000,
      })
    ).fetched;
  }

  /** The node's cache warm-up figures (GET /v1/info), for `berth nodes`. */
  async warmth(timeoutMs = 2_000): Promise<Warmth> {
    return (await callJson<NodeInfo>(`${this.url}/v1/info`, { timeoutMs })).warmth;
  }
}

/** Calls a query node: scans (an Arrow IPC stream back, stats and errors in trailers) and pushes of segment files. */
import http from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { bearer } from '../common/auth.js';
import { callJson, ServiceCallError } from '../common/http-client.js';
import type { CanaryResult } from './canary.js';
import { SCAN_ERROR_TRAILER, SCAN_STATS_TRAILER, type ScanRequest, type ScanStats } from './api.js';
import type { Warmth } from './warmer.js';

export type { ScanRequest, ScanStats, Warmth };

/** A scan under way: its rows as an Arrow IPC stream, and how it ended once they are read. */
export interface ScanResponse {
  body: Readable;
  /** Resolves with the node's stats once the body has ended; rejects when the scan was cut short. */
  ended: Promise<ScanStats>;
}

/** Connections to query nodes stay open between scans. */
const agent = new http.Agent({ keepAlive: true, maxSockets: 64 });

/**
 * Starts a scan on a node. A non-2xx answer, or a stream the node ended with an error trailer, is
 * a ServiceCallError with the node's status and message; a dropped connection is an Error. The
 * signal abandons it, and the node then interrupts DuckDB.
 */
export function scanOnNode(nodeUrl: string, request: ScanRequest, token: string, signal: AbortSignal): Promise<ScanResponse> {
  return new Promise((resolve, reject) => {
    const payload = JSON.stringify(request);
    const call = http.request(`${nodeUrl}/v1/scan`, {
      method: 'POST',
      agent,
      signal,
      headers: { 'content-type': 'application/json', 'content-length': Buffer.byteLength(payload), ...bearer(token) },
    });
    call.once('error', reject);
    call.once('response', (response) => {
      if (response.statusCode !== 200) {
        const parts: Buffer[] = [];
        response.on('data', (part: Buffer) => parts.push(part));
        response.once('error', reject);
        response.once('end', () => {
          const text = Buffer.concat(parts).toString();
          let body: { error?: string; message?: string } | undefined;
          try {
            body = JSON.parse(text) as typeof body;
          } catch {
            body = undefined;
          }
          reject(new ServiceCallError(response.statusCode ?? 502, body, `scan on ${nodeUrl} answered ${response.statusCode}: ${body?.message ?? text}`));
        });
        return;
      }
      const body = new PassThrough();
      // The trailers are there once the message is complete.
      const ended = new Promise<ScanStats>((done, fail) => {
        const settle = () => {
          if (!response.complete) {
            const error = new Error(`scan on ${nodeUrl}: the connection dropped mid-stream`);
            fail(error);
            body.destroy(error);
            return;
          }
          const failure = response.trailers[SCAN_ERROR_TRAILER];
          if (failure) {
            const { status, error, message } = JSON.parse(failure) as { status: number; error: string; message: string };
            fail(new ServiceCallError(status, { error, message }, `scan on ${nodeUrl} failed: ${message}`));
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

export interface PushResult {
  accepted: boolean;
  owner: string | null;
  reason?: string;
}

/** Pushes a segment file into a node's cache; `signal` (a cancelled activity) aborts the request. */
export async function pushToNode(nodeUrl: string, table: string, segmentId: string, body: Buffer, token: string, timeoutMs = 60_000, signal?: AbortSignal): Promise<PushResult> {
  const timeout = AbortSignal.timeout(timeoutMs);
  const response = await fetch(`${nodeUrl}/v1/segments/${encodeURIComponent(segmentId)}?table=${encodeURIComponent(table)}`, {
    method: 'POST',
    headers: { 'content-type': 'application/octet-stream', ...bearer(token) },
    body,
    signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
  });
  const result = (await response.json()) as PushResult & { message?: string };
  if (!response.ok) throw new ServiceCallError(response.status, result, `push to ${nodeUrl} answered ${response.status}: ${result.message}`);
  return result;
}

/** Asks a node to read Berth's canary object from storage and scan it. */
export function canaryOnNode(nodeUrl: string, token: string, timeoutMs = 60_000): Promise<CanaryResult> {
  return callJson<CanaryResult>(`${nodeUrl}/v1/canary`, { method: 'POST', token, timeoutMs });
}

/** A node's cache warm-up figures (GET /v1/info), for `berth nodes`. */
export async function warmthOfNode(nodeUrl: string, timeoutMs = 2_000): Promise<Warmth> {
  return (await callJson<{ warmth: Warmth }>(`${nodeUrl}/v1/info`, { timeoutMs })).warmth;
}

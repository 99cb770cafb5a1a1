/** Calls a query node: scans (Parquet back, stats in a header) and pushes of segment files. */
import { bearer } from '../common/auth.js';
import { callJson, ServiceCallError } from '../common/http-client.js';
import type { CanaryResult } from './canary.js';
import type { Warmth } from './warmer.js';
import { PARQUET_TYPE, SCAN_STATS_HEADER, type ScanStats } from './app.js';

export type { ScanStats };

export interface ScanRequest {
  sql: string;
  tables: { name: string; columns: { name: string; type: string }[]; segments: string[] }[];
  maxResultBytes?: number;
}

/** Runs a scan on a node; a timeout (ms) or an abort signal abandons it, and the node then interrupts DuckDB. */
export async function scanOnNode(nodeUrl: string, request: ScanRequest, token: string, until: number | AbortSignal): Promise<{ body: Buffer; stats: ScanStats }> {
  const signal = typeof until === 'number' ? AbortSignal.timeout(until) : until;
  const response = await fetch(`${nodeUrl}/v1/scan`, {
    method: 'POST',
    headers: { 'content-type': 'application/json', ...bearer(token) },
    body: JSON.stringify(request),
    signal,
  });
  if (!response.ok || response.headers.get('content-type') !== PARQUET_TYPE) {
    const text = await response.text();
    let body: { error?: string; message?: string } | undefined;
    try {
      body = JSON.parse(text) as typeof body;
    } catch {
      body = undefined;
    }
    throw new ServiceCallError(response.status, body, `scan on ${nodeUrl} answered ${response.status}: ${body?.message ?? text}`);
  }
  const stats = JSON.parse(response.headers.get(SCAN_STATS_HEADER) ?? '{}') as ScanStats;
  return { body: Buffer.from(await response.arrayBuffer()), stats };
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

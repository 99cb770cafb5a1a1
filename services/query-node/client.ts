/**
 * A typed client for one query node: scans (an Arrow IPC stream back, stats and errors in
 * trailers), pushes of segment files, warm-up passes, the canary and the node's info. The coordinator's scatter
 * and ingest, the merge's push, the heavy pool's readiness check and the benches call nodes
 * through it; the shapes it sends and reads are the node's api.ts.
 */
import http from 'node:http';
import { PassThrough, type Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { StringDecoder } from 'node:string_decoder';
import { bearer } from '../common/auth.js';
import { ARROW_STREAM_TYPE } from '../common/arrow-exchange.js';
import type { ExchangeInput } from '../common/final-stage/contract.js';
import { callJson, ServiceCallError } from '../common/http-client.js';
import type { JsonValue } from '../coordinator/api.js';
import type { ErrorBody } from '../common/schemas.js';
import type { SqlParameter } from '../common/sql-parameters.js';
import {
  SCAN_ERROR_TRAILER,
  SCAN_STATS_TRAILER,
  type CanaryResult,
  type FinalStageLine,
  type FinalStagePart,
  type FinalStageRequest,
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
        headers: {
          'content-type': 'application/json',
          'content-length': Buffer.byteLength(payload),
          ...bearer(this.token),
        },
      });
      abortOn(call, signal);
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

  /**
   * Pushes a segment file into the node's cache; `signal` (a cancelled activity) aborts the request.
   * A node that has not answered within `timeoutMs` (a frozen one) fails it with an error that says so.
   */
  async push(
    table: string,
    segmentId: string,
    body: Buffer | Readable,
    options: { timeoutMs?: number; signal?: AbortSignal } = {},
  ): Promise<PushResult> {
    const timeoutMs = options.timeoutMs ?? 60_000;
    // Infinity: the caller's signal alone bounds it (a push streamed as its file is written).
    const timeout = Number.isFinite(timeoutMs) ? AbortSignal.timeout(timeoutMs) : new AbortController().signal;
    const signal = options.signal ? AbortSignal.any([options.signal, timeout]) : timeout;
    const url = `${this.url}/v1/segments/${encodeURIComponent(segmentId)}?table=${encodeURIComponent(table)}`;
    const headers = { 'content-type': 'application/octet-stream', ...bearer(this.token) };
    try {
      const { status, result } = Buffer.isBuffer(body)
        ? await fetch(url, { method: 'POST', headers, body, signal }).then(async (response) => ({
            status: response.status,
            result: (await response.json()) as PushResult & Partial<ErrorBody>,
          }))
        : await postStream(url, headers, body, signal);
      if (status < 200 || status >= 300)
        throw new ServiceCallError(status, result, `push to ${this.url} answered ${status}: ${result.message}`);
      return result;
    } catch (error) {
      if (timeout.aborted && !options.signal?.aborted)
        throw new Error(`push to ${this.url}: no answer within ${timeoutMs} ms`, { cause: error });
      throw error;
    }
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

  // ── a heavy query's final stage, run on this node (final-stages.ts) ──

  /** Opens a final stage with these inputs; the node closes it after `ttlMs` without a call. */
  async openFinalStage(inputs: ExchangeInput[], ttlMs: number): Promise<string> {
    const body: FinalStageRequest = { inputs, ttlMs };
    return (await callJson<{ id: string }>(`${this.url}/v1/final-stages`, { body, token: this.token })).id;
  }

  /** Streams one scan's Arrow IPC into an input of the final stage, as a part of its own. */
  async sendFinalStagePart(id: string, input: string, body: Readable, signal: AbortSignal): Promise<FinalStagePart> {
    const path = `/v1/final-stages/${id}/inputs/${encodeURIComponent(input)}`;
    const response = await this.stream('POST', path, { 'content-type': ARROW_STREAM_TYPE }, signal, body);
    return JSON.parse(await text(response)) as FinalStagePart;
  }

  async discardFinalStagePart(id: string, input: string, part: string): Promise<void> {
    const path = `/v1/final-stages/${id}/inputs/${encodeURIComponent(input)}/parts/${encodeURIComponent(part)}`;
    await callJson(`${this.url}${path}`, { method: 'DELETE', token: this.token });
  }

  async closeFinalStage(id: string): Promise<void> {
    await callJson(`${this.url}/v1/final-stages/${id}`, { method: 'DELETE', token: this.token });
  }

  /**
   * Runs the final SQL over the final stage's inputs: its columns, then its rows as the node makes
   * them. A failure before the first row is a ServiceCallError with the node's status; one after,
   * an error thrown by `rows`. close() stops the node's DuckDB.
   */
  async finalStageAnswer(
    id: string,
    sql: string,
    signal: AbortSignal,
    parameters: readonly SqlParameter[] = [],
  ): Promise<FinalStageAnswer> {
    const response = await this.stream(
      'POST',
      `/v1/final-stages/${id}/answer`,
      { 'content-type': 'application/json' },
      signal,
      JSON.stringify(parameters.length > 0 ? { sql, parameters } : { sql }),
    );
    // Read a line at a time as the caller asks: the node computes no further ahead than that.
    const lines = ndjsonLines(response);
    // Hanging up stops the node's DuckDB when the answer is not yet whole, and when it is, lets go
    // of a connection whose unread lines would otherwise hold it (and the query's signal) forever.
    const hangUp = () => {
      if (!response.readableEnded) response.destroy();
    };
    const next = async (): Promise<FinalStageLine> => {
      const { value, done } = await lines.next();
      if (done) throw new Error(`final stage on ${this.url}: the answer ended before its last line`);
      return JSON.parse(value) as FinalStageLine;
    };
    let first: FinalStageLine;
    try {
      first = await next();
      if (!('columns' in first))
        throw new Error(`final stage on ${this.url}: the answer did not begin with its columns`);
    } catch (error) {
      hangUp();
      throw error;
    }
    const url = this.url;
    async function* rows(): AsyncGenerator<JsonValue[][]> {
      for (;;) {
        const line = await next();
        if ('end' in line) return;
        if ('error' in line)
          throw new ServiceCallError(line.status, line, `final stage on ${url} failed: ${line.message}`);
        if ('rows' in line) yield line.rows as JsonValue[][];
      }
    }
    return { columns: first.columns, types: first.types, rows: rows(), close: hangUp };
  }

  /** A request whose body and answer stream; a non-2xx answer is a ServiceCallError with the node's message. */
  private stream(
    method: 'POST',
    path: string,
    headers: Record<string, string>,
    signal: AbortSignal,
    body: Readable | string,
  ): Promise<http.IncomingMessage> {
    return new Promise((resolve, reject) => {
      const call = http.request(`${this.url}${path}`, {
        method,
        agent,
        headers: { ...headers, ...bearer(this.token) },
      });
      abortOn(call, signal);
      call.once('error', (error) => {
        // A body that cannot go on is let go: its source (a scan) then ends, and says how.
        if (typeof body !== 'string') body.destroy();
        reject(error);
      });
      call.once('response', (response) => {
        const status = response.statusCode ?? 502;
        if (status >= 200 && status < 300) return resolve(response);
        // Refused: nothing more of the body goes out.
        if (typeof body !== 'string') {
          body.unpipe(call);
          body.destroy();
        }
        text(response).then((answer) => {
          let parsed: ErrorBody | undefined;
          try {
            parsed = JSON.parse(answer) as ErrorBody;
          } catch {
            parsed = undefined;
          }
          reject(
            new ServiceCallError(
              status,
              parsed,
              `${method} ${path} on ${this.url} answered ${status}: ${parsed?.message ?? answer}`,
            ),
          );
        }, reject);
      });
      if (typeof body === 'string') call.end(body);
      else {
        body.once('error', (error) => call.destroy(error));
        body.pipe(call);
      }
    });
  }
}

/**
 * Destroys the call when `signal` aborts, for as long as the call lasts. Not http.request's own
 * `signal`: with a kept-alive agent its listener outlives the call, and an abort after the answer
 * ended throws an AbortError that no caller can catch.
 */
function abortOn(call: http.ClientRequest, signal: AbortSignal): void {
  const abort = () => {
    call.destroy(new DOMException('The operation was aborted', 'AbortError'));
  };
  if (signal.aborted) return abort();
  signal.addEventListener('abort', abort, { once: true });
  call.once('close', () => signal.removeEventListener('abort', abort));
}

/** A final stage's answer as it streams from the node. */
export interface FinalStageAnswer {
  columns: string[];
  types: string[];
  rows: AsyncIterable<JsonValue[][]>;
  close(): void;
}

/** An NDJSON body's lines, read from the socket only as they are asked for. */
async function* ndjsonLines(response: http.IncomingMessage): AsyncGenerator<string> {
  const utf8 = new StringDecoder('utf8'); // a character may span two chunks
  let rest = '';
  for await (const chunk of response) {
    const lines = (rest + utf8.write(chunk as Buffer)).split('\n');
    rest = lines.pop()!;
    for (const line of lines) if (line) yield line;
  }
  rest += utf8.end();
  if (rest) yield rest;
}

/**
 * POSTs a stream (chunked, as its source makes it: a merge pushes its file as DuckDB writes it)
 * and reads the JSON answer, by node:http as this client's other streamed calls.
 */
function postStream(
  url: string,
  headers: Record<string, string>,
  body: Readable,
  signal: AbortSignal,
): Promise<{ status: number; result: PushResult & Partial<ErrorBody> }> {
  return new Promise((resolve, reject) => {
    const call = http.request(url, { method: 'POST', agent, headers, signal });
    call.once('response', (response) => {
      text(response).then((answer) => {
        try {
          resolve({ status: response.statusCode ?? 0, result: JSON.parse(answer) as PushResult & Partial<ErrorBody> });
        } catch (error) {
          reject(error as Error);
        }
      }, reject);
    });
    // The pipeline settles once the body is sent, before any answer: an abort or a dropped
    // connection while the node still holds the push must fail the call itself.
    call.once('error', reject);
    // An early answer (a decline) settles the push; the rest of the body then only drains.
    pipeline(body, call).catch(reject);
  });
}

/** The whole body of an answer, as text. */
async function text(response: http.IncomingMessage): Promise<string> {
  const parts: Buffer[] = [];
  for await (const part of response) parts.push(part as Buffer);
  return Buffer.concat(parts).toString();
}

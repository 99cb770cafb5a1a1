/** JSON over HTTP between services, with a timeout and errors that say which call failed. */
import http from 'node:http';
import https from 'node:https';
import { bearer } from './auth.js';
import { DomainError, type ErrorKind } from './errors.js';

/** Thrown when another service answers a call with a non-2xx status. */
export class ServiceCallError extends Error {
  override name = 'ServiceCallError';
  constructor(
    readonly status: number,
    readonly body: { error?: string; message?: string } | undefined,
    message: string,
  ) {
    super(message);
  }

  /** The code the service answered with (its `error` field), which callers branch on. */
  get code(): string | undefined {
    return this.body?.error;
  }
}

const REFUSALS: Partial<Record<number, ErrorKind>> = { 400: 'invalid', 404: 'not_found', 409: 'conflict' };

/**
 * Rethrows another service's refusal of what this request asked for (a 400, 404 or 409) as this
 * service's own answer, with its code and message; any other failure stays what it was.
 */
export function passOnRefusal(error: unknown): never {
  const kind = error instanceof ServiceCallError ? REFUSALS[error.status] : undefined;
  if (kind) {
    const refusal = error as ServiceCallError;
    throw new DomainError(kind, refusal.code ?? 'refused', refusal.body?.message ?? refusal.message);
  }
  throw error;
}

export interface CallOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
  body?: unknown;
  token?: string;
  /** @default 10000 */
  timeoutMs?: number;
  /** Abandons the call (the request is destroyed; the call rejects with the signal's reason). */
  signal?: AbortSignal;
  /** Sends `body`, a string or bytes, as it is with this content type (NDJSON rows, Parquet) rather than as JSON. */
  contentType?: string;
}

/**
 * Connections to other services stay open between calls. Node's own client, not fetch: fetch's
 * machinery (WHATWG streams, Headers, a timeout signal per call) was the largest part of the
 * coordinator's one meta call per query, about half a millisecond of its event loop.
 */
const agents: Record<string, http.Agent> = {
  // An idle socket closes after 4 s, as fetch's did: long before a server closes it (fastify: 72 s).
  // A server that stops closes its sockets sooner: send() repeats a call that met one.
  'http:': new http.Agent({ keepAlive: true, timeout: 4_000 }),
  'https:': new https.Agent({ keepAlive: true, timeout: 4_000 }),
};

export async function callJson<T>(url: string, options: CallOptions = {}): Promise<T> {
  return (await request<T>(url, options)).body;
}

/**
 * A GET answered only when what it names has changed from the version `etag` names: meta's member
 * list, long-polled. Unchanged (a 304), it resolves with `changed: false`.
 */
export async function callJsonIfChanged<T>(
  url: string,
  etag: string | undefined,
  options: CallOptions = {},
): Promise<{ changed: false } | { changed: true; body: T; etag: string | undefined }> {
  const answer = await request<T>(url, options, etag === undefined ? {} : { 'if-none-match': etag });
  if (answer.status === 304) return { changed: false };
  return { changed: true, body: answer.body, etag: answer.headers.etag as string | undefined };
}

async function request<T>(
  url: string,
  options: CallOptions,
  extraHeaders: Record<string, string> = {},
): Promise<{ status: number; body: T; headers: http.IncomingHttpHeaders }> {
  const body =
    options.body === undefined
      ? undefined
      : options.contentType
        ? Buffer.isBuffer(options.body)
          ? options.body
          : String(options.body)
        : JSON.stringify(options.body);
  const headers: Record<string, string | number> = { ...extraHeaders };
  if (body !== undefined) {
    headers['content-type'] = options.contentType ?? 'application/json';
    headers['content-length'] = Buffer.byteLength(body);
  }
  if (options.token) Object.assign(headers, bearer(options.token));
  let answer: { status: number; text: string; headers: http.IncomingHttpHeaders };
  try {
    answer = await send(
      url,
      options.method ?? (body === undefined ? 'GET' : 'POST'),
      headers,
      body,
      options.timeoutMs,
      undefined,
      true,
      options.signal,
    );
  } catch (error) {
    throw new Error(`${options.method ?? 'call'} ${url} failed: ${(error as Error).message}`, { cause: error });
  }
  const { status, text } = answer;
  const parsed = text ? (JSON.parse(text) as unknown) : undefined;
  if (status !== 304 && (status < 200 || status > 299)) {
    const failure = parsed as { error?: string; message?: string } | undefined;
    throw new ServiceCallError(status, failure, `${url} answered ${status}: ${failure?.message ?? text}`);
  }
  return { status, body: parsed as T, headers: answer.headers };
}

/**
 * One request: the status and the body as text, or an error when there is no answer within
 * `timeoutMs`. A kept-alive connection the server closed just as the call went out on it (a
 * service stopping or restarting) fails with a reset before any answer: the server never took the
 * call, so it goes out once more, on a new connection, within the same deadline.
 */
function send(
  url: string,
  method: string,
  headers: Record<string, string | number>,
  body: string | Buffer | undefined,
  timeoutMs = 10_000,
  deadline = Date.now() + timeoutMs,
  pooled = true,
  signal?: AbortSignal,
): Promise<{ status: number; text: string; headers: http.IncomingHttpHeaders }> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(signal.reason as Error);
    const target = new URL(url);
    const agent = agents[target.protocol];
    if (!agent) throw new Error(`${target.protocol} is not HTTP`);
    const request = (target.protocol === 'https:' ? https : http).request(target, {
      method,
      headers,
      agent: pooled ? agent : false,
    });
    const timer = setTimeout(
      () => request.destroy(new Error(`no answer within ${timeoutMs} ms`)),
      Math.max(deadline - Date.now(), 0),
    );
    const abandon = () => request.destroy(signal!.reason as Error);
    signal?.addEventListener('abort', abandon, { once: true });
    const settled = () => {
      clearTimeout(timer);
      signal?.removeEventListener('abort', abandon);
    };
    let answered = false;
    const fail = (error: NodeJS.ErrnoException) => {
      settled();
      const stale =
        !signal?.aborted &&
        request.reusedSocket &&
        !answered &&
        (error.code === 'ECONNRESET' || error.code === 'EPIPE');
      if (!stale) return reject(error);
      send(url, method, headers, body, timeoutMs, deadline, false, signal).then(resolve, reject);
    };
    request.once('error', fail);
    request.once('response', (response) => {
      answered = true;
      const parts: Buffer[] = [];
      response.on('data', (part: Buffer) => parts.push(part));
      response.once('error', fail);
      response.once('end', () => {
        settled();
        resolve({ status: response.statusCode ?? 0, text: Buffer.concat(parts).toString(), headers: response.headers });
      });
    });
    request.end(body);
  });
}

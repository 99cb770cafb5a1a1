/** JSON over HTTP between services, with a timeout and errors that say which call failed. */
import { bearer } from './auth.js';

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

export interface CallOptions {
  method?: 'GET' | 'POST' | 'PUT' | 'DELETE';
  body?: unknown;
  token?: string;
  /** @default 10000 */
  timeoutMs?: number;
  /** Sends `body`, a string, as it is with this content type (NDJSON rows) rather than as JSON. */
  contentType?: string;
}

export async function callJson<T>(url: string, options: CallOptions = {}): Promise<T> {
  const headers: Record<string, string> = {};
  if (options.body !== undefined) headers['content-type'] = options.contentType ?? 'application/json';
  if (options.token) Object.assign(headers, bearer(options.token));
  let response: Response;
  try {
    response = await fetch(url, {
      method: options.method ?? (options.body === undefined ? 'GET' : 'POST'),
      headers,
      body:
        options.body === undefined
          ? undefined
          : options.contentType
            ? String(options.body)
            : JSON.stringify(options.body),
      signal: AbortSignal.timeout(options.timeoutMs ?? 10_000),
    });
  } catch (error) {
    throw new Error(`${options.method ?? 'call'} ${url} failed: ${(error as Error).message}`, { cause: error });
  }
  const text = await response.text();
  const parsed = text ? (JSON.parse(text) as unknown) : undefined;
  if (!response.ok) {
    const body = parsed as { error?: string; message?: string } | undefined;
    throw new ServiceCallError(response.status, body, `${url} answered ${response.status}: ${body?.message ?? text}`);
  }
  return parsed as T;
}

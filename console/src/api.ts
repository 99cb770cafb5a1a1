/**
 * The console's calls to its API. The session cookie goes by itself (same origin); every call
 * adds the header the server checks on changes (CSRF). A 401 means the session is gone: back to
 * the login page.
 */
export class ApiError extends Error {
  constructor(
    readonly status: number,
    message: string,
  ) {
    super(message);
  }
}

export async function api<T>(path: string, init: { body?: unknown; signal?: AbortSignal } = {}): Promise<T> {
  const response = await call(path, init);
  const body = (await response.json().catch(() => undefined)) as { message?: string } | undefined;
  if (!response.ok) throw new ApiError(response.status, body?.message ?? `the console API answered ${response.status}`);
  return body as T;
}

/** A file the API answers (a download), as a Blob. */
export async function apiFile(path: string, init: { body?: unknown; signal?: AbortSignal } = {}): Promise<Blob> {
  const response = await call(path, init);
  if (response.ok) return response.blob();
  const body = (await response.json().catch(() => undefined)) as { message?: string } | undefined;
  throw new ApiError(response.status, body?.message ?? `the console API answered ${response.status}`);
}

async function call(path: string, init: { body?: unknown; signal?: AbortSignal }): Promise<Response> {
  const response = await fetch(`/console/api${path}`, {
    method: init.body === undefined ? 'GET' : 'POST',
    credentials: 'same-origin',
    headers: {
      'x-berth-console': '1',
      ...(init.body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: init.body === undefined ? undefined : JSON.stringify(init.body),
    signal: init.signal,
  });
  if (response.status === 401) {
    location.assign('/console/');
    throw new ApiError(401, 'the session has ended: log in again');
  }
  return response;
}

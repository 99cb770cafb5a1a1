/**
 * JSON calls between services (services/common/http-client.ts): answers parsed, a non-2xx answer
 * a ServiceCallError with the service's code, and a service that never answers given up on at the
 * call's timeout, saying so, with the connection closed.
 */
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { callJson, ServiceCallError } from '../services/common/http-client.js';

describe('calls between services', () => {
  let server: http.Server;
  let url: string;
  const open = new Set<import('node:net').Socket>();

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      if (request.url === '/silent') return; // never answers
      const parts: Buffer[] = [];
      request.on('data', (part: Buffer) => parts.push(part));
      request.on('end', () => {
        if (request.url === '/refuse') {
          response.writeHead(409, { 'content-type': 'application/json' });
          return response.end(JSON.stringify({ error: 'conflict', message: 'it is taken' }));
        }
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(
          JSON.stringify({
            method: request.method,
            type: request.headers['content-type'] ?? null,
            auth: request.headers.authorization ?? null,
            body: Buffer.concat(parts).toString(),
          }),
        );
      });
    });
    server.on('connection', (socket) => {
      open.add(socket);
      socket.once('close', () => open.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`;
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('sends JSON with its token and reads the JSON answer', async () => {
    expect(await callJson(`${url}/echo`, { body: { n: 1, s: 'ü' }, token: 't0ken' })).toEqual({
      method: 'POST',
      type: 'application/json',
      auth: 'Bearer t0ken',
      body: '{"n":1,"s":"ü"}',
    });
    expect(await callJson(`${url}/echo`)).toMatchObject({ method: 'GET', type: null, body: '' });
    expect(await callJson(`${url}/echo`, { body: '{"a":1}\n', contentType: 'application/x-ndjson' })).toMatchObject({
      type: 'application/x-ndjson',
      body: '{"a":1}\n',
    });
  });

  it('turns a non-2xx answer into a ServiceCallError with the service’s code and message', async () => {
    const failure = await callJson(`${url}/refuse`, { method: 'PUT', body: {} }).catch((error: unknown) => error);
    expect(failure).toBeInstanceOf(ServiceCallError);
    expect(failure).toMatchObject({
      status: 409,
      code: 'conflict',
      message: `${url}/refuse answered 409: it is taken`,
    });
  });

  it('gives up on a service that does not answer within the timeout, says so, and closes the connection', async () => {
    const failure = await callJson(`${url}/silent`, { timeoutMs: 300 }).catch((error: unknown) => error);
    expect((failure as Error).message).toBe(`call ${url}/silent failed: no answer within 300 ms`);
    await expect.poll(() => open.size, { timeout: 10_000 }).toBe(0);
  });

  it('sends a call again on a new connection when the server closed the kept-alive one as it went out', async () => {
    // The first connection is closed by the server on its second call, before any answer: as a
    // service that stops or restarts closes the connections it kept.
    const calls = new Map<import('node:net').Socket, number>(); // per connection, in the order they opened
    const closing = http.createServer((request, response) => {
      const call = (calls.get(request.socket) ?? 0) + 1;
      calls.set(request.socket, call);
      const connection = [...calls.keys()].indexOf(request.socket);
      if (connection === 0 && call === 2) return request.socket.destroy();
      request.resume().on('end', () => {
        response.writeHead(200, { 'content-type': 'application/json' });
        response.end(JSON.stringify({ connection }));
      });
    });
    await new Promise<void>((resolve) => closing.listen(0, '127.0.0.1', resolve));
    const closingUrl = `http://127.0.0.1:${(closing.address() as AddressInfo).port}/x`;
    try {
      expect(await callJson(closingUrl)).toEqual({ connection: 0 });
      expect(await callJson(closingUrl, { method: 'PUT', body: { n: 1 } })).toEqual({ connection: 1 });
      expect(calls.size).toBe(2);
    } finally {
      closing.closeAllConnections();
      await new Promise((resolve) => closing.close(resolve));
    }
  });

  it('says which call failed when nothing listens', async () => {
    const failure = await callJson('http://127.0.0.1:1/x', { method: 'DELETE' }).catch((error: unknown) => error);
    expect((failure as Error).message).toMatch(/^DELETE http:\/\/127\.0\.0\.1:1\/x failed: .*ECONNREFUSED/);
  });
});

/**
 * The coordinator's client of a node's final stage (services/query-node/client.ts) over a real
 * socket and its kept-alive connections: a query's signal that aborts after the answer was whole
 * throws nothing, and closing an answer not yet whole hangs up, which is how the node learns to
 * stop its DuckDB. A part the node refuses says why, though the refusal broke its upload.
 */
import { getEventListeners } from 'node:events';
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { Readable } from 'node:stream';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { ServiceCallError } from '../services/common/http-client.js';
import { QueryNodeClient } from '../services/query-node/client.js';

describe('a final stage answer from a node', () => {
  let server: http.Server;
  let client: QueryNodeClient;
  /** Resolves when the server sees the answer's connection close before it wrote the end. */
  let hungUp: Promise<void> = Promise.resolve();
  /** The connections open on the node's side. */
  const open = new Set<Socket>();

  beforeAll(async () => {
    server = http.createServer((request, response) => {
      if (request.url?.includes('/inputs/')) {
        // A part refused at once, mid-body, as a node refuses a stream whose columns are not the plan's.
        response.writeHead(409, { 'content-type': 'application/json', connection: 'close' });
        response.end(JSON.stringify({ error: 'schema_mismatch', message: 'column c0 is VARCHAR, not BIGINT' }), () =>
          request.socket.destroy(),
        );
        return;
      }
      request.resume();
      if (request.url?.includes('/big/')) {
        // The whole answer in one piece: 2,000 rows the caller leaves unread.
        const rows = Array.from({ length: 2000 }, (_, i) => [i, 'x'.repeat(50)]);
        response.writeHead(200, { 'content-type': 'application/x-ndjson' });
        return response.end(
          `${JSON.stringify({ columns: ['x', 'y'], types: ['INTEGER', 'VARCHAR'] })}\n${JSON.stringify({ rows })}\n${JSON.stringify({ end: true })}\n`,
        );
      }
      response.writeHead(200, { 'content-type': 'application/x-ndjson' });
      response.write(`${JSON.stringify({ columns: ['x'], types: ['INTEGER'] })}\n`);
      response.write(`${JSON.stringify({ rows: [[1], [2]] })}\n`);
      if (request.url?.includes('/whole/')) return response.end(`${JSON.stringify({ end: true })}\n`);
      hungUp = new Promise((resolve) => response.once('close', () => resolve()));
    });
    server.on('connection', (socket) => {
      open.add(socket);
      socket.once('close', () => open.delete(socket));
    });
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
    client = new QueryNodeClient(`http://127.0.0.1:${(server.address() as AddressInfo).port}`);
  });
  afterAll(async () => {
    server.closeAllConnections();
    await new Promise((resolve) => server.close(resolve));
  });

  it('lets the query’s signal abort after the answer was whole, with nothing thrown', async () => {
    const uncaught: unknown[] = [];
    const record = (error: unknown) => uncaught.push(error);
    process.on('uncaughtException', record);
    try {
      for (let round = 0; round < 3; round++) {
        const query = new AbortController();
        const answer = await client.finalStageAnswer('whole', 'SELECT 1', query.signal);
        const rows: unknown[][] = [];
        for await (const batch of answer.rows) rows.push(...batch);
        answer.close();
        // The answer's connection has gone back to the agent; the query ends after it.
        await new Promise((resolve) => setImmediate(resolve));
        query.abort();
        await new Promise((resolve) => setImmediate(resolve));
        expect(rows).toEqual([[1], [2]]);
      }
    } finally {
      process.off('uncaughtException', record);
    }
    expect(uncaught).toEqual([]);
  });

  it('lets go of a whole answer closed unread: its connection and the query’s signal', async () => {
    const query = new AbortController();
    const answer = await client.finalStageAnswer('big', 'SELECT 1', query.signal);
    await new Promise((resolve) => setTimeout(resolve, 50)); // the whole answer has arrived, most of it unread
    const before = open.size;
    answer.close();
    await expect.poll(() => open.size).toBe(before - 1);
    expect(getEventListeners(query.signal, 'abort')).toEqual([]);
  });

  it('says why a part was refused, though the refusal cut its body short', async () => {
    for (let round = 0; round < 5; round++) {
      // 64 MiB the node never reads: the refusal comes while the body is still going out.
      const chunk = Buffer.alloc(1024 ** 2);
      const body = Readable.from(
        (function* () {
          for (let i = 0; i < 64; i++) yield chunk;
        })(),
      );
      const refused = await client
        .sendFinalStagePart('stage', 'in0', body, new AbortController().signal)
        .catch((e: unknown) => e);
      expect(refused).toBeInstanceOf(ServiceCallError);
      expect((refused as ServiceCallError).status).toBe(409);
      expect((refused as ServiceCallError).message).toContain('column c0 is VARCHAR, not BIGINT');
      expect(body.destroyed).toBe(true);
    }
  });

  it('hangs up an answer closed before its end', async () => {
    const answer = await client.finalStageAnswer('partial', 'SELECT 1', new AbortController().signal);
    expect(answer.columns).toEqual(['x']);
    answer.close();
    await hungUp;
  });
});

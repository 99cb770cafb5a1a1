import { randomUUID } from 'node:crypto';
import type { Client } from '@temporalio/client';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { buildControllerApp } from '../services/controller/app.js';
import { temporalClient } from './helpers/berth-worker.js';

const TOKEN = 'controller-test-token';
const auth = { authorization: `Bearer ${TOKEN}` };

describe('the controller', () => {
  let client: Client;
  let app: ReturnType<typeof buildControllerApp>;
  const group = `ctl-${randomUUID().slice(0, 8)}`;
  const taskQueue = `nobody-${randomUUID()}`;

  beforeAll(async () => {
    client = await temporalClient();
    // No worker polls this task queue: these requests must be refused before any workflow runs.
    app = buildControllerApp({
      client,
      pools: [{ group }],
      token: TOKEN,
      taskQueue,
      logger: false,
    });
  });
  afterAll(async () => {
    await app.close();
    await client.connection.close();
  });

  it('refuses to launch paid capacity without the token', async () => {
    for (const headers of [{}, { authorization: 'Bearer not-the-token' }]) {
      const response = await app.inject({
        method: 'POST',
        url: `/v1/pools/${group}/launch`,
        payload: { target: 2 },
        headers,
      });
      expect(response.statusCode).toBe(401);
    }
    expect((await app.inject(`/v1/pools/${group}/status`)).json()).toMatchObject({ phase: 'parked', target: 0 });
  });

  it('refuses a preflight without the token: it starts a workflow and reports install details', async () => {
    for (const headers of [{}, { authorization: 'Bearer not-the-token' }]) {
      const response = await app.inject({ url: `/v1/pools/${group}/preflight`, headers });
      expect(response.statusCode).toBe(401);
    }
    const workflows = client.workflow.list({ query: `TaskQueue = "${taskQueue}"` });
    for await (const workflow of workflows) expect.unreachable(`a workflow ran: ${workflow.workflowId}`);
  });

  it.each([0, -1, 2.5, 1e9, '2', true, null])(
    'answers target %j with a 400 that says what is wrong',
    async (target) => {
      const response = await app.inject({
        method: 'POST',
        url: `/v1/pools/${group}/launch`,
        payload: { target },
        headers: auth,
      });
      expect(response.statusCode).toBe(400);
      expect(response.json().message).toMatch(/target/);
    },
  );

  it('answers unknown fields with a 400', async () => {
    const response = await app.inject({
      method: 'POST',
      url: `/v1/pools/${group}/launch`,
      payload: { target: 2, force: true },
      headers: auth,
    });
    expect(response.statusCode).toBe(400);
  });

  it('answers an unknown group with a 404 that names the groups it knows', async () => {
    const response = await app.inject({
      method: 'POST',
      url: '/v1/pools/nope/launch',
      payload: { target: 2 },
      headers: auth,
    });
    expect(response.statusCode).toBe(404);
    expect(response.json().message).toBe(`unknown group "nope": this controller scales "${group}"`);
    expect((await app.inject('/v1/pools/nope/status')).statusCode).toBe(404);
  });

  it('reads a pool that never ran as parked at zero, not as a fault', async () => {
    const response = await app.inject(`/v1/pools/${group}/status`);
    expect(response.statusCode).toBe(200);
    expect(response.json()).toMatchObject({ group, phase: 'parked', target: 0, serveReady: false });
  });
});

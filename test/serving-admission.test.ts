/**
 * The serving group's admission on one coordinator: a bounded line with a timeout in front of a
 * fixed number of slots, and 429s with Retry-After past it. The work here is promises the test
 * settles, so every state is reached on purpose.
 */
import { describe, expect, it } from 'vitest';
import { HttpError } from '../services/common/errors.js';
import { ServingAdmission } from '../services/coordinator/admission/serving-admission.js';

/** Work that runs until the test says so. */
function gate() {
  let open!: () => void;
  const opened = new Promise<void>((resolve) => (open = resolve));
  let started = false;
  return {
    work: async () => {
      started = true;
      await opened;
      return 'done';
    },
    open,
    get started() {
      return started;
    },
  };
}

const signal = () => new AbortController().signal;
const tick = () => new Promise((resolve) => setTimeout(resolve, 10));

describe('serving admission', () => {
  it('runs at most maxConcurrency queries at once and starts the waiting ones in arrival order', async () => {
    const admission = new ServingAdmission({ maxConcurrency: 2, maxQueueSize: 10 });
    const gates = Array.from({ length: 4 }, gate);
    const runs = gates.map((g) => admission.run(signal(), g.work));
    await tick();
    expect(gates.map((g) => g.started)).toEqual([true, true, false, false]);
    expect(admission.counts).toEqual({ running: 2, waiting: 2 });
    gates[1]!.open();
    await tick();
    expect(gates.map((g) => g.started)).toEqual([true, true, true, false]);
    for (const g of gates) g.open();
    expect(await Promise.all(runs)).toEqual(['done', 'done', 'done', 'done']);
    expect(admission.counts).toEqual({ running: 0, waiting: 0 });
  });

  it('answers 429 queue_full with a Retry-After at once past the queue, and the admitted queries still finish', async () => {
    const admission = new ServingAdmission({ maxConcurrency: 1, maxQueueSize: 2, retryAfterSeconds: 3 });
    const gates = Array.from({ length: 3 }, gate);
    const runs = gates.map((g) => admission.run(signal(), g.work));
    const refused = gate();
    const error = await admission.run(signal(), refused.work).catch((e: unknown) => e);
    expect(error).toBeInstanceOf(HttpError);
    expect(error).toMatchObject({ statusCode: 429, code: 'queue_full', headers: { 'retry-after': '3' } });
    expect((error as Error).message).toMatch(/queue is full \(2 queries waiting, 1 running\): try again in 3 s/);
    expect(refused.started).toBe(false);
    for (const g of gates) g.open();
    expect(await Promise.all(runs)).toEqual(['done', 'done', 'done']);
    // Room again once the line has moved.
    expect(await admission.run(signal(), async () => 'again')).toBe('again');
  });

  it('answers 429 queue_timeout to a query that waited too long, never runs it, and frees its place', async () => {
    const admission = new ServingAdmission({ maxConcurrency: 1, maxQueueSize: 1, queueTimeoutMs: 50 });
    const running = gate();
    const first = admission.run(signal(), running.work);
    const late = gate();
    await expect(admission.run(signal(), late.work)).rejects.toMatchObject({
      statusCode: 429,
      code: 'queue_timeout',
      headers: { 'retry-after': '1' },
    });
    expect(admission.counts).toEqual({ running: 1, waiting: 0 });
    running.open();
    await first;
    await tick();
    expect(late.started).toBe(false);
    expect(admission.counts).toEqual({ running: 0, waiting: 0 });
  });

  it('lets a query whose client leaves go from the line with the reason, without running it', async () => {
    const admission = new ServingAdmission({ maxConcurrency: 1, maxQueueSize: 5 });
    const running = gate();
    const first = admission.run(signal(), running.work);
    const leaving = gate();
    const client = new AbortController();
    const waiting = admission.run(client.signal, leaving.work);
    client.abort(new HttpError(499, 'client_gone', 'the client went away'));
    await expect(waiting).rejects.toMatchObject({ statusCode: 499 });
    expect(admission.counts).toEqual({ running: 1, waiting: 0 });
    running.open();
    await first;
    await tick();
    expect(leaving.started).toBe(false);
  });

  it('answers a running query whose client left at once, and holds its slot until its work has stopped', async () => {
    const admission = new ServingAdmission({ maxConcurrency: 1, maxQueueSize: 5 });
    const running = gate();
    const client = new AbortController();
    const run = admission.run(client.signal, running.work);
    await tick();
    client.abort(new HttpError(499, 'client_gone', 'the client went away'));
    await expect(run).rejects.toMatchObject({ statusCode: 499 });
    const next = gate();
    const after = admission.run(signal(), next.work);
    await tick();
    expect(next.started).toBe(false);
    running.open();
    next.open();
    expect(await after).toBe('done');
  });
});

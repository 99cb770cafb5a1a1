/**
 * Admission by counts (core/admission.ts), held to its rules under random sequences of reports,
 * capacity changes and expiries from several coordinators.
 */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { applyReport, distribute, removeCoordinator, totals, type CoordinatorAdmission } from '../core/admission.js';

type Step =
  | { kind: 'report'; coordinator: string; running: number; waiting: number }
  | { kind: 'capacity'; capacity: number }
  | { kind: 'expire'; coordinator: string };

const coordinators = ['a', 'b', 'c', 'd'];
const step: fc.Arbitrary<Step> = fc.oneof(
  {
    weight: 6,
    arbitrary: fc.record({
      kind: fc.constant('report' as const),
      coordinator: fc.constantFrom(...coordinators),
      running: fc.nat(12),
      waiting: fc.nat(30),
    }),
  },
  { weight: 1, arbitrary: fc.record({ kind: fc.constant('capacity' as const), capacity: fc.nat(10) }) },
  {
    weight: 1,
    arbitrary: fc.record({ kind: fc.constant('expire' as const), coordinator: fc.constantFrom(...coordinators) }),
  },
);

describe('admission by counts', () => {
  it('never grants past the capacity nor queues past the limit, never takes a grant back behind a coordinator, and leaves no slot idle while demand waits', () => {
    fc.assert(
      fc.property(fc.nat(10), fc.nat(40), fc.array(step, { maxLength: 60 }), (initialCapacity, maxQueueSize, steps) => {
        let capacity = initialCapacity;
        let all: Record<string, CoordinatorAdmission> = {};
        for (const s of steps) {
          const before = all;
          if (s.kind === 'capacity') {
            capacity = s.capacity;
            all = distribute(all, capacity);
          } else if (s.kind === 'expire') {
            all = removeCoordinator(all, s.coordinator, { capacity, maxQueueSize });
          } else {
            // A coordinator never runs more than it was granted (it is the coordinator's own rule).
            const running = Math.min(s.running, before[s.coordinator]?.grant ?? 0);
            all = applyReport(all, s.coordinator, { running, waiting: s.waiting }, { capacity, maxQueueSize });
            const own = all[s.coordinator]!;
            expect(own.queued).toBeLessThanOrEqual(s.waiting);
            expect(own.grant).toBeGreaterThanOrEqual(running);
          }
          const sum = totals(all);
          // Grants above capacity only ever come from slots already running when capacity dropped.
          expect(sum.granted).toBeLessThanOrEqual(
            Math.max(
              capacity,
              Object.values(before).reduce((n, a) => n + a.grant, 0),
            ),
          );
          expect(sum.waiting).toBeLessThanOrEqual(Math.max(maxQueueSize, totals(before).waiting));
          for (const [id, a] of Object.entries(all)) {
            expect(a.grant).toBeLessThanOrEqual(a.running + a.queued);
            // Only the coordinator's own report (or its expiry) can lower its grant.
            if (!(s.kind === 'report' && s.coordinator === id) && before[id])
              expect(a.grant).toBeGreaterThanOrEqual(before[id]!.grant);
          }
          // Work-conserving: a free slot exists only when no coordinator wants one.
          if (sum.granted < capacity) for (const a of Object.values(all)) expect(a.grant).toBe(a.running + a.queued);
        }
      }),
      { numRuns: 500 },
    );
  });

  it('shares free slots max-min fairly between coordinators that want them', () => {
    const all = distribute(
      {
        a: { running: 0, waiting: 10, queued: 10, grant: 0 },
        b: { running: 0, waiting: 10, queued: 10, grant: 0 },
        c: { running: 0, waiting: 1, queued: 1, grant: 0 },
      },
      7,
    );
    expect([all.a!.grant, all.b!.grant, all.c!.grant]).toEqual([3, 3, 1]);
  });

  it('gives the queue first come, first served between reports', () => {
    const limits = { capacity: 0, maxQueueSize: 5 };
    let all = applyReport({}, 'a', { running: 0, waiting: 4 }, limits);
    all = applyReport(all, 'b', { running: 0, waiting: 4 }, limits);
    expect([all.a!.queued, all.b!.queued]).toEqual([4, 1]);
    all = applyReport(all, 'a', { running: 0, waiting: 2 }, limits); // two of a's left the queue
    all = applyReport(all, 'b', { running: 0, waiting: 4 }, limits);
    expect([all.a!.queued, all.b!.queued]).toEqual([2, 3]);
  });
});

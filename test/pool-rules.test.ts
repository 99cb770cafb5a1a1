/** The heavy pool's decisions (core/pool-rules.ts): rounding, validation, readiness, the monitor and the reaper. */
import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import {
  idleDeadline,
  LARGEST_SANE_TARGET,
  launchRequestError,
  monitor,
  raiseTarget,
  readReadiness,
  roundTarget,
} from '../core/pool-rules.js';

const steps = fc.record({ increment: fc.integer({ min: 1, max: 8 }), maxReplicas: fc.integer({ min: 1, max: 64 }) });

describe('the heavy pool rules', () => {
  it('rounds a target up to a whole increment, capped at the maximum, and only ever raises', () => {
    fc.assert(
      fc.property(steps, fc.integer({ min: 1, max: LARGEST_SANE_TARGET }), fc.nat(64), (s, requested, current) => {
        const rounded = roundTarget(requested, s);
        expect(rounded).toBeLessThanOrEqual(s.maxReplicas);
        if (rounded < s.maxReplicas) {
          expect(rounded % s.increment).toBe(0);
          expect(rounded).toBeGreaterThanOrEqual(requested);
          expect(rounded - requested).toBeLessThan(s.increment);
        }
        const raised = raiseTarget(current, requested, s);
        expect(raised).toBeGreaterThanOrEqual(current);
        expect(raiseTarget(raised, requested, s)).toBe(raised); // idempotent
      }),
    );
  });

  it.each([
    [{ target: 0 }, /at least 1/],
    [{ target: -1 }, /at least 1/],
    [{ target: 2.5 }, /whole number/],
    [{ target: '2' }, /whole number/],
    [{ target: 1e9 }, /past 10000/],
    [{ target: 2, group: 'other' }, /unknown group "other"/],
  ])('rejects launch %j with a reason', (request, reason) => {
    expect(launchRequestError(request, { group: 'heavy', increment: 2, maxReplicas: 4 })).toMatch(reason);
  });

  it('accepts a whole target for its own group', () => {
    expect(
      launchRequestError({ target: 3, group: 'heavy' }, { group: 'heavy', increment: 2, maxReplicas: 4 }),
    ).toBeUndefined();
  });

  it('names the readiness layer that has not passed', () => {
    expect(readReadiness({ pods: 1, freshBackends: 0 }, 2, 0)).toEqual({
      podsUp: false,
      backendsUp: false,
      notReady: '1 of 2 pods running',
    });
    expect(readReadiness({ pods: 2, freshBackends: 0 }, 2, 0)).toEqual({
      podsUp: true,
      backendsUp: false,
      notReady: '2 of 2 pods running, but 0 of 2 new backends alive in meta',
    });
    expect(readReadiness({ pods: 4, freshBackends: 2 }, 4, 2)).toEqual({ podsUp: true, backendsUp: true });
    // Backends never pass before pods do: a count of registrations is not a count of pods.
    fc.assert(
      fc.property(fc.nat(10), fc.nat(10), fc.nat(10), fc.nat(10), (pods, fresh, target, previous) => {
        const v = readReadiness({ pods, freshBackends: fresh }, target, Math.min(previous, target));
        if (v.backendsUp) expect(v.podsUp).toBe(true);
        expect(v.notReady === undefined).toBe(v.backendsUp);
      }),
    );
  });

  it('raises by one increment only after waiting lasted the whole window, never past the maximum', () => {
    fc.assert(
      fc.property(
        steps,
        fc.nat(64),
        fc.nat(5),
        fc.nat(100_000),
        fc.nat(100_000),
        fc.integer({ min: 1, max: 60_000 }),
        (s, target, waiting, since, elapsed, sustainMs) => {
          const d = monitor({ waiting, waitingSince: since, now: since + elapsed, sustainMs, target, steps: s });
          if (waiting === 0) expect(d).toEqual({ waitingSince: undefined });
          if (d.raiseTo !== undefined) {
            expect(elapsed).toBeGreaterThanOrEqual(sustainMs);
            expect(d.raiseTo).toBeGreaterThan(target);
            expect(d.raiseTo).toBeLessThanOrEqual(s.maxReplicas);
            // From a target on the increment grid (every target the pool sets), exactly one step.
            if (target % s.increment === 0) expect(d.raiseTo).toBe(Math.min(s.maxReplicas, target + s.increment));
          }
          if (waiting > 0 && target >= s.maxReplicas) expect(d.raiseTo).toBeUndefined();
          if (d.wakeAt !== undefined) expect(d.wakeAt).toBe(since + sustainMs);
        },
      ),
    );
  });

  it('parks only an idle pool, the idle timeout after its last activity', () => {
    expect(idleDeadline({ running: 0, waiting: 0, lastActivity: 1_000, idleTimeoutMs: 500 })).toBe(1_500);
    expect(idleDeadline({ running: 1, waiting: 0, lastActivity: 1_000, idleTimeoutMs: 500 })).toBeUndefined();
    expect(idleDeadline({ running: 0, waiting: 3, lastActivity: 1_000, idleTimeoutMs: 500 })).toBeUndefined();
  });
});

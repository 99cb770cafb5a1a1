import fc from 'fast-check';
import { LRUCache } from 'lru-cache';
import { describe, expect, it } from 'vitest';
import { S3Fifo } from '../core/s3-fifo.js';

/** A sequence of cache operations over a small key space, so that keys come back. */
const operations = fc.array(
  fc.oneof(
    fc.record({
      op: fc.constant('set' as const),
      key: fc.integer({ min: 0, max: 40 }),
      size: fc.integer({ min: 1, max: 120 }),
    }),
    fc.record({ op: fc.constant('hit' as const), key: fc.integer({ min: 0, max: 40 }) }),
    fc.record({ op: fc.constant('delete' as const), key: fc.integer({ min: 0, max: 40 }) }),
  ),
  { maxLength: 400 },
);
const RUNS = { seed: 1313, numRuns: 300 };

describe('the S3-FIFO policy', () => {
  it('stays within its budget and accounts for every entry it held: held, evicted once, or deleted (property)', () => {
    fc.assert(
      fc.property(fc.integer({ min: 50, max: 1000 }), operations, (maxSize, ops) => {
        const evicted: number[] = [];
        const cache = new S3Fifo<number>({ maxSize, onEvict: (key) => evicted.push(key) });
        const model = new Map<number, number>(); // what the cache must hold (key -> size), evictions aside
        for (const step of ops) {
          let kept: boolean | undefined;
          if (step.op === 'set') {
            const held = cache.has(step.key);
            kept = cache.set(step.key, step.size);
            // A held key takes its new size (and may then be evicted); a new one over the budget is refused.
            if (held || step.size <= maxSize) model.set(step.key, step.size);
            else expect(kept).toBe(false);
          } else if (step.op === 'hit') {
            expect(cache.hit(step.key)).toBe(cache.has(step.key));
          } else {
            expect(cache.delete(step.key)).toBe(model.delete(step.key));
          }
          // Each eviction removes a key the model still holds; drop it from the model.
          for (const key of evicted.splice(0)) {
            expect(model.has(key), `evicted ${key}, which was not held`).toBe(true);
            model.delete(key);
          }
          if (kept !== undefined) expect(kept).toBe(model.has(step.key));
          expect(cache.usedSize).toBeLessThanOrEqual(maxSize);
          expect(new Set(cache.keys())).toEqual(new Set(model.keys()));
          expect(cache.usedSize).toBe([...model.values()].reduce((sum, size) => sum + size, 0));
        }
      }),
      RUNS,
    );
  });

  it('never evicts for an entry that fits in free space', () => {
    const evicted: string[] = [];
    const cache = new S3Fifo<string>({ maxSize: 100, onEvict: (key) => evicted.push(key) });
    for (let i = 0; i < 10; i++) cache.set(`k${i}`, 10);
    expect(evicted).toEqual([]);
    expect(cache.usedSize).toBe(100);
    cache.set('k10', 10);
    expect(evicted).toEqual(['k0']); // nothing was hit: first in, first out
  });

  it('keeps entries that were hit through a scan of new keys of any length, where LRU loses them (property)', () => {
    fc.assert(
      fc.property(
        fc.integer({ min: 200, max: 2000 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 30 }),
        fc.array(fc.integer({ min: 1, max: 40 }), { minLength: 1, maxLength: 300 }),
        (maxSize, hotSizes, scanSizes) => {
          // The hot set fits in the main queue's share, with room for the largest scan entry.
          const room = 0.9 * maxSize - Math.max(...scanSizes);
          const hot: number[] = [];
          let used = 0;
          for (const size of hotSizes) {
            if (used + size > room) continue;
            hot.push(size);
            used += size;
          }
          const cache = new S3Fifo<string>({ maxSize });
          hot.forEach((size, i) => cache.set(`hot-${i}`, size));
          hot.forEach((_, i) => cache.hit(`hot-${i}`));
          scanSizes.forEach((size, i) => cache.set(`scan-${i}`, size));
          expect(hot.filter((_, i) => !cache.has(`hot-${i}`))).toEqual([]);
        },
      ),
      RUNS,
    );
    // The same pattern under LRU: a scan as large as the cache takes everything.
    const lru = new LRUCache<string, number>({ maxSize: 1000, sizeCalculation: (size) => size });
    for (let i = 0; i < 10; i++) lru.set(`hot-${i}`, 10);
    for (let i = 0; i < 10; i++) lru.get(`hot-${i}`);
    for (let i = 0; i < 100; i++) lru.set(`scan-${i}`, 10);
    expect([...lru.keys()].filter((k) => k.startsWith('hot-'))).toEqual([]);
  });

  it('keeps a stable part of a loop larger than the cache, where LRU hits nothing', () => {
    const hitRate = (cache: { hit(key: number): boolean; set(key: number, size: number): unknown }) => {
      let hits = 0;
      for (let pass = 0; pass < 6; pass++) {
        for (let key = 0; key < 400; key++) {
          const hit = cache.hit(key);
          if (!hit) cache.set(key, 10);
          if (pass === 5 && hit) hits++;
        }
      }
      return hits / 400;
    };
    const lru = new LRUCache<number, number>({ maxSize: 3000, sizeCalculation: (size) => size });
    expect(hitRate({ hit: (key) => lru.get(key) !== undefined, set: (key, size) => lru.set(key, size) })).toBe(0);
    // 300 of 400 fit; the main queue's share is 270.
    expect(hitRate(new S3Fifo<number>({ maxSize: 3000 }))).toBeGreaterThanOrEqual(0.5);
  });

  it('keeps a resized entry in its place, with its hits', () => {
    const evicted: string[] = [];
    const cache = new S3Fifo<string>({ maxSize: 100, onEvict: (key) => evicted.push(key) });
    for (let i = 0; i < 5; i++) cache.set(`k${i}`, 10);
    cache.hit('k0');
    expect(cache.set('k0', 50)).toBe(true); // grows to fill the budget: nothing leaves yet
    expect(cache.usedSize).toBe(90);
    cache.set('k5', 20); // the small queue's tail, k0, was hit: it moves on, and k1 leaves
    expect(evicted).toEqual(['k1']);
    expect(cache.has('k0')).toBe(true);
  });

  it('admits a key it evicted recently straight into the main queue', () => {
    const cache = new S3Fifo<string>({ maxSize: 100 });
    for (let i = 0; i < 11; i++) cache.set(`k${i}`, 10); // k0 leaves the small queue unhit: a ghost
    expect(cache.has('k0')).toBe(false);
    cache.set('k0', 10);
    // Back in the main queue (listed first), ahead of the small queue's keys.
    expect(cache.keys()[0]).toBe('k0');
  });
});

import fc from 'fast-check';
import { describe, expect, it } from 'vitest';
import { idHash, pairHash, pairUniform, type Hash64 } from '../core/ownership-hash.js';

const hex = (h: Hash64) => h.hi.toString(16).padStart(8, '0') + h.lo.toString(16).padStart(8, '0');
const toBig = (h: Hash64) => (BigInt(h.hi) << 32n) | BigInt(h.lo);
const MASK64 = (1n << 64n) - 1n;

/** MurmurHash3's fmix64 in BigInt: the slow, obvious reference for the 32-bit arithmetic. */
function referenceFmix64(x: bigint): bigint {
  x ^= x >> 33n;
  x = (x * 0xff51afd7ed558ccdn) & MASK64;
  x ^= x >> 33n;
  x = (x * 0xc4ceb9fe1a85ec53n) & MASK64;
  x ^= x >> 33n;
  return x;
}

describe('the ownership hash contract', () => {
  // Golden vectors: these values are a protocol between every process that places segments.
  // If this test fails, ownership moved; do not update the numbers, restore the hash.
  it('hashes ids with XXH64, seed 0, over UTF-8 bytes', () => {
    expect(hex(idHash(''))).toBe('ef46db3751d8e999'); // the published XXH64 of empty input
    expect(hex(idHash('seg-0001'))).toBe('b5da1c285085330f');
    expect(hex(idHash('node-a'))).toBe('05378e2c8885d70b');
    expect(hex(idHash('events/2026-11-30/l0-000042'))).toBe('77165db1bcb59201');
    expect(hex(idHash('séγ-ü-🚀'))).toBe('1f887a1ea8eb1382');
  });

  it('mixes a segment and a node into a fixed 64-bit value and uniform draw', () => {
    const pair = (s: string, n: string) => ({
      hash: hex(pairHash(idHash(s), idHash(n))),
      u: pairUniform(idHash(s), idHash(n)),
    });
    expect(pair('seg-0001', 'node-a')).toEqual({ hash: '592ce9c6dbc7ea31', u: 0.34834157090133966 });
    expect(pair('events/2026-11-30/l0-000042', 'query-node-7')).toEqual({
      hash: '9626aab9bd6d8d5c',
      u: 0.5865275100199395,
    });
    expect(pair('x', 'y')).toEqual({ hash: 'c17c465a749a2ca4', u: 0.7558025332296913 });
  });

  it('computes exactly fmix64(segment XOR node) for arbitrary 64-bit inputs', () => {
    const half = fc.integer({ min: 0, max: 0xffff_ffff });
    const hash = fc.record({ hi: half, lo: half });
    fc.assert(
      fc.property(hash, hash, (segment, node) => {
        const expected = referenceFmix64(toBig(segment) ^ toBig(node));
        expect(toBig(pairHash(segment, node))).toBe(expected);
      }),
      { seed: 20261130, numRuns: 20_000 },
    );
  });

  it('draws u from the top 53 bits, strictly inside (0, 1)', () => {
    const same = { hi: 0x1234, lo: 0x5678 };
    // fmix64(0) = 0: a zero draw is guarded to the smallest positive value, never 0.
    expect(pairUniform(same, same)).toBe(2 ** -53);
    const h = pairHash({ hi: 1, lo: 2 }, { hi: 3, lo: 4 });
    expect(pairUniform({ hi: 1, lo: 2 }, { hi: 3, lo: 4 })).toBe(Number(toBig(h) >> 11n) / 2 ** 53);
    fc.assert(
      fc.property(fc.string(), fc.string(), (s, n) => {
        const u = pairUniform(idHash(s), idHash(n));
        return u > 0 && u < 1;
      }),
      { seed: 7, numRuns: 5_000 },
    );
  });
});

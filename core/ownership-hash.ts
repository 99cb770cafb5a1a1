/**
 * The ownership hash contract. Every process that places segments (coordinator, query nodes,
 * merges, warmers) must compute exactly these numbers forever: changing any line here silently
 * moves segments between owners. test/ownership-hash.test.ts freezes it with golden vectors.
 *
 * - An id (segment or node) hashes to XXH64 of its UTF-8 bytes with seed 0.
 * - A (segment, node) pair hashes to fmix64(segmentHash XOR nodeHash), MurmurHash3's 64-bit
 *   finalizer, so the hot path hashes each segment id once and mixes it with precomputed node
 *   hashes in plain 32-bit arithmetic (no BigInt, no string concatenation per pair).
 * - The pair's uniform draw u is its top 53 bits over 2^53, with u = 0 replaced by 2^-53.
 *
 * xxhash-wasm needs an asynchronous WebAssembly set-up, which Temporal's workflow sandbox cannot
 * run: ownership is therefore computed in activities and services, never in workflow code (the
 * linter forbids workflows/ from importing this module).
 */
import xxhash from 'xxhash-wasm';

const { h64 } = await xxhash();

/** A 64-bit hash as two unsigned 32-bit halves. */
export interface Hash64 {
  hi: number;
  lo: number;
}

const TWO_POW_53 = 2 ** 53;
const LOW_32 = 0xffff_ffffn;

/** XXH64 (seed 0) of the id's UTF-8 bytes. */
export function idHash(id: string): Hash64 {
  const h = h64(id, 0n);
  return { hi: Number(h >> 32n), lo: Number(h & LOW_32) };
}

/**
 * The uniform draw u in (0, 1) for one (segment, node) pair: the top 53 bits of
 * fmix64(segment XOR node) over 2^53, never 0.
 */
export function pairUniform(segment: Hash64, node: Hash64): number {
  return pairUniformOf(segment.hi, segment.lo, node.hi, node.lo);
}

/** pairUniform on unpacked halves, for loops over precomputed node hashes. */
export function pairUniformOf(segHi: number, segLo: number, nodeHi: number, nodeLo: number): number {
  fmix64(segHi ^ nodeHi, segLo ^ nodeLo);
  const top53 = mixed[0]! * 2 ** 21 + (mixed[1]! >>> 11);
  return top53 === 0 ? 1 / TWO_POW_53 : top53 / TWO_POW_53;
}

// fmix64's result, [hi, lo]: written in place so that the hot loop allocates nothing.
const mixed = new Uint32Array(2);

/**
 * MurmurHash3's fmix64 on a 64-bit value given as 32-bit halves:
 *   k ^= k >>> 33; k *= 0xff51afd7ed558ccd; k ^= k >>> 33; k *= 0xc4ceb9fe1a85ec53; k ^= k >>> 33
 * Each 64-bit multiplication keeps the low 64 bits: the low halves' 32x32 product is computed
 * exactly in 16-bit limbs, and Math.imul gives the two cross terms that land in the high half.
 * Unrolled by hand: this runs once per (segment, node) pair on the coordinator's hot path.
 */
function fmix64(hi: number, lo: number): void {
  hi >>>= 0;
  lo = (lo ^ (hi >>> 1)) >>> 0; // k ^= k >>> 33 leaves the high half as it was

  // k *= 0xff51afd7ed558ccd (low-half limbs 0xed55, 0x8ccd)
  let a0 = lo & 0xffff;
  let a1 = lo >>> 16;
  let p00 = a0 * 0x8ccd;
  let p01 = a0 * 0xed55;
  let p10 = a1 * 0x8ccd;
  let mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  let carry = a1 * 0xed55 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16);
  let productLo = (((mid & 0xffff) << 16) | (p00 & 0xffff)) >>> 0;
  hi = (carry + Math.imul(lo, 0xff51afd7) + Math.imul(hi, 0xed558ccd)) >>> 0;
  lo = (productLo ^ (hi >>> 1)) >>> 0; // k ^= k >>> 33

  // k *= 0xc4ceb9fe1a85ec53 (low-half limbs 0x1a85, 0xec53)
  a0 = lo & 0xffff;
  a1 = lo >>> 16;
  p00 = a0 * 0xec53;
  p01 = a0 * 0x1a85;
  p10 = a1 * 0xec53;
  mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  carry = a1 * 0x1a85 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16);
  productLo = (((mid & 0xffff) << 16) | (p00 & 0xffff)) >>> 0;
  hi = (carry + Math.imul(lo, 0xc4ceb9fe) + Math.imul(hi, 0x1a85ec53)) >>> 0;
  lo = (productLo ^ (hi >>> 1)) >>> 0; // k ^= k >>> 33

  mixed[0] = hi;
  mixed[1] = lo;
}

/** The pair's full 64-bit mixed hash, for golden vectors and the reference test. */
export function pairHash(segment: Hash64, node: Hash64): Hash64 {
  fmix64(segment.hi ^ node.hi, segment.lo ^ node.lo);
  return { hi: mixed[0]!, lo: mixed[1]! };
}

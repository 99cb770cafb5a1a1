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

// fmix64 constants 0xff51afd7ed558ccd and 0xc4ceb9fe1a85ec53, split into halves.
const C1_HI = 0xff51afd7;
const C1_LO = 0xed558ccd;
const C2_HI = 0xc4ceb9fe;
const C2_LO = 0x1a85ec53;

// The running 64-bit value of pairUniform, kept in module scope so the hot loop allocates nothing.
let hi = 0;
let lo = 0;

/** (hi, lo) *= (cHi, cLo), modulo 2^64, using 16-bit limbs for the exact low 32x32 product. */
function multiply(cHi: number, cLo: number): void {
  const a0 = lo & 0xffff;
  const a1 = lo >>> 16;
  const b0 = cLo & 0xffff;
  const b1 = cLo >>> 16;
  const p00 = a0 * b0;
  const p01 = a0 * b1;
  const p10 = a1 * b0;
  const mid = (p00 >>> 16) + (p01 & 0xffff) + (p10 & 0xffff);
  const carry = a1 * b1 + (p01 >>> 16) + (p10 >>> 16) + (mid >>> 16);
  const newLo = (((mid & 0xffff) << 16) | (p00 & 0xffff)) >>> 0;
  hi = (carry + Math.imul(lo, cHi) + Math.imul(hi, cLo)) >>> 0;
  lo = newLo;
}

/** value ^= value >>> 33 */
function xorShift33(): void {
  lo = (lo ^ (hi >>> 1)) >>> 0;
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
  hi = (segHi ^ nodeHi) >>> 0;
  lo = (segLo ^ nodeLo) >>> 0;
  xorShift33();
  multiply(C1_HI, C1_LO);
  xorShift33();
  multiply(C2_HI, C2_LO);
  xorShift33();
  const top53 = hi * 2 ** 21 + (lo >>> 11);
  return top53 === 0 ? 1 / TWO_POW_53 : top53 / TWO_POW_53;
}

/** The pair's full 64-bit mixed hash, for golden vectors and the reference test. */
export function pairHash(segment: Hash64, node: Hash64): Hash64 {
  pairUniform(segment, node);
  return { hi, lo };
}

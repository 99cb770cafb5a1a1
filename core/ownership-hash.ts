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
const TWO_POW_MINUS_32 = 2 ** -32;

// XXH64 comes back as a BigInt: storing it into a 64-bit typed array and reading the two 32-bit
// words back costs no BigInt arithmetic (each BigInt operation allocates).
const word64 = new BigUint64Array(1);
const words32 = new Uint32Array(word64.buffer);
const LITTLE_ENDIAN = new Uint8Array(new Uint32Array([1]).buffer)[0] === 1;
const HI = LITTLE_ENDIAN ? 1 : 0;
const LO = LITTLE_ENDIAN ? 0 : 1;

/** XXH64 (seed 0) of the id's UTF-8 bytes. */
export function idHash(id: string): Hash64 {
  word64[0] = h64(id, 0n);
  return { hi: words32[HI]!, lo: words32[LO]! };
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
  return uniformOf(fmix64(segHi ^ nodeHi, segLo ^ nodeLo), lowWord[0]!);
}

/**
 * The top 32 bits of the pair's mixed hash. The pair's u lies in [high / 2^32, (high + 1) / 2^32),
 * so the owner loop can rule a node out on this word alone; `lastPairUniform` finishes the draw.
 */
export function pairHighWord(segHi: number, segLo: number, nodeHi: number, nodeLo: number): number {
  return fmix64(segHi ^ nodeHi, segLo ^ nodeLo);
}

/** The u of the pair that pairHighWord mixed last, given the high word it returned. */
export function lastPairUniform(high: number): number {
  return uniformOf(high, lowWord[0]!);
}

/** The pair's full 64-bit mixed hash, for golden vectors and the reference test. */
export function pairHash(segment: Hash64, node: Hash64): Hash64 {
  const hi = fmix64(segment.hi ^ node.hi, segment.lo ^ node.lo);
  return { hi, lo: lowWord[0]! };
}

function uniformOf(hi: number, lo: number): number {
  const top53 = hi * 2 ** 21 + (lo >>> 11);
  return top53 === 0 ? 1 / TWO_POW_53 : top53 / TWO_POW_53;
}

// The low word of fmix64's last result: kept in place so that the hot loop allocates nothing.
const lowWord = new Uint32Array(1);

/**
 * MurmurHash3's fmix64 on a 64-bit value given as 32-bit halves; returns the high word and leaves
 * the low word in `lowWord`:
 *   k ^= k >>> 33; k *= 0xff51afd7ed558ccd; k ^= k >>> 33; k *= 0xc4ceb9fe1a85ec53; k ^= k >>> 33
 * Each 64-bit multiplication keeps the low 64 bits: lo × the constant's low half gives the low word
 * (Math.imul) and a carry into the high word, and Math.imul gives the two cross terms that land in
 * the high half. The carry is exact although lo × c (< 2^64) is not: that double is within 2^10 of
 * the true product, and subtracting the low word adds at most 2^10 more, so dividing by 2^32 lands
 * within 2^-21 of the integer carry, and rounding gives it. Unrolled by hand: this runs once per
 * (segment, node) pair on the coordinator's hot path.
 */
function fmix64(hi: number, lo: number): number {
  hi >>>= 0;
  lo = (lo ^ (hi >>> 1)) >>> 0; // k ^= k >>> 33 leaves the high half as it was

  // k *= 0xff51afd7ed558ccd
  let low = Math.imul(lo, 0xed558ccd) >>> 0;
  let carry = Math.round((lo * 0xed558ccd - low) * TWO_POW_MINUS_32);
  hi = (carry + Math.imul(lo, 0xff51afd7) + Math.imul(hi, 0xed558ccd)) >>> 0;
  lo = (low ^ (hi >>> 1)) >>> 0; // k ^= k >>> 33

  // k *= 0xc4ceb9fe1a85ec53
  low = Math.imul(lo, 0x1a85ec53) >>> 0;
  carry = Math.round((lo * 0x1a85ec53 - low) * TWO_POW_MINUS_32);
  hi = (carry + Math.imul(lo, 0xc4ceb9fe) + Math.imul(hi, 0x1a85ec53)) >>> 0;
  lowWord[0] = low ^ (hi >>> 1); // k ^= k >>> 33

  return hi;
}

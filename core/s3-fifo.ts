/**
 * S3-FIFO, the eviction policy of the query node's segment cache, by size (bytes) instead of count.
 *
 * Plain LRU keeps whatever was read last, so a scan larger than the cache evicts everything,
 * itself included, and a repeated full scan never hits. S3-FIFO (Yang et al., "FIFO queues are all
 * you need for cache eviction", SOSP 2023) admits new entries to a small FIFO queue (10 % of the
 * budget); one that is hit before it leaves the small queue moves to the main queue, and one that
 * is not leaves the cache, its key remembered in a ghost queue. A key found in the ghost queue
 * comes back straight into the main queue. The main queue is a FIFO with reinsertion: an entry
 * hit since it last passed the tail goes round again with its count lowered (counts saturate at 3).
 * Entries read once, a scan's, therefore pass through the small queue without touching the main
 * one, and under a repeated scan the main queue keeps a stable part of it.
 *
 * This follows the paper's algorithm (libCacheSim's S3FIFOv0) with sizes: queue shares and the
 * ghost queue's capacity are in bytes (the ghost queue remembers keys whose sizes add up to the
 * main queue's share, the paper's "as many entries as the main queue" for equal sizes). No npm
 * package implements it; it is small, and test/s3-fifo.test.ts checks its invariants.
 */

export interface S3FifoOptions<K> {
  /** The budget: entries' sizes never add up to more. */
  maxSize: number;
  /** Called once for every entry that leaves the cache by eviction (not by `delete`). */
  onEvict?: (key: K, size: number) => void;
  /** The small queue's share of the budget. @default 0.1 */
  smallShare?: number;
}

interface Entry {
  size: number;
  /** Hits since admission or since the main queue's last pass over it, capped at MAX_FREQUENCY. */
  frequency: number;
}

const MAX_FREQUENCY = 3;

export class S3Fifo<K> {
  /** Insertion order is queue order: the first key is the tail (next to leave), the last the head. */
  private readonly small = new Map<K, Entry>();
  private readonly main = new Map<K, Entry>();
  private readonly ghost = new Map<K, number>();
  private smallSize = 0;
  private mainSize = 0;
  private ghostSize = 0;
  private readonly smallCapacity: number;
  private readonly ghostCapacity: number;

  constructor(private readonly options: S3FifoOptions<K>) {
    const share = options.smallShare ?? 0.1;
    this.smallCapacity = options.maxSize * share;
    this.ghostCapacity = options.maxSize * (1 - share);
  }

  get maxSize(): number {
    return this.options.maxSize;
  }

  /** The sizes of the entries held, added up. */
  get usedSize(): number {
    return this.smallSize + this.mainSize;
  }

  get count(): number {
    return this.small.size + this.main.size;
  }

  has(key: K): boolean {
    return this.small.has(key) || this.main.has(key);
  }

  /** Records a hit on the key; false when it is not held. */
  hit(key: K): boolean {
    const entry = this.small.get(key) ?? this.main.get(key);
    if (!entry) return false;
    if (entry.frequency < MAX_FREQUENCY) entry.frequency++;
    return true;
  }

  /**
   * Holds the key with this size, evicting others as needed. A key already held keeps its place
   * and its hits and takes the new size (a segment whose file grew); growing may evict it too.
   * False when the key is not held afterwards: a new key larger than the whole budget is refused.
   */
  set(key: K, size: number): boolean {
    const held = this.small.get(key) ?? this.main.get(key);
    if (held) {
      if (this.small.has(key)) this.smallSize += size - held.size;
      else this.mainSize += size - held.size;
      held.size = size;
      while (this.usedSize > this.options.maxSize) this.evict();
      return this.has(key);
    }
    if (size > this.options.maxSize) return false;
    while (this.usedSize + size > this.options.maxSize) this.evict();
    const entry: Entry = { size, frequency: 0 };
    const ghostSize = this.ghost.get(key);
    if (ghostSize !== undefined) {
      this.ghost.delete(key);
      this.ghostSize -= ghostSize;
      this.main.set(key, entry);
      this.mainSize += size;
    } else {
      this.small.set(key, entry);
      this.smallSize += size;
    }
    return true;
  }

  /** Drops the key without calling onEvict; true when it was held. */
  delete(key: K): boolean {
    const small = this.small.get(key);
    if (small) {
      this.small.delete(key);
      this.smallSize -= small.size;
      return true;
    }
    const main = this.main.get(key);
    if (main) {
      this.main.delete(key);
      this.mainSize -= main.size;
      return true;
    }
    return false;
  }

  /** Keys held: the main queue's, then the small queue's, each from tail to head. */
  keys(): K[] {
    return [...this.main.keys(), ...this.small.keys()];
  }

  /** Evicts one entry: from the small queue while it holds its share (or the main queue is empty), else from the main queue. */
  private evict(): void {
    if (this.smallSize >= this.smallCapacity || this.main.size === 0) this.evictSmall();
    else this.evictMain();
  }

  /** The small queue's tail leaves: to the main queue if it was hit there, else out (remembered as a ghost). */
  private evictSmall(): void {
    for (const [key, entry] of this.small) {
      this.small.delete(key);
      this.smallSize -= entry.size;
      if (entry.frequency > 0) {
        entry.frequency = 0;
        this.main.set(key, entry);
        this.mainSize += entry.size;
        continue;
      }
      this.remember(key, entry.size);
      this.options.onEvict?.(key, entry.size);
      return;
    }
    this.evictMain(); // every entry of the small queue had been hit: they are in the main queue now
  }

  /**
   * The main queue's tail leaves, unless it was hit since its last pass: then it goes round again
   * (to the head) with one hit fewer. Counts are at most 3, so this ends within four passes.
   */
  private evictMain(): void {
    for (const [key, entry] of this.main) {
      this.main.delete(key);
      if (entry.frequency > 0) {
        entry.frequency--;
        this.main.set(key, entry); // visited again by this loop, after the others
        continue;
      }
      this.mainSize -= entry.size;
      this.options.onEvict?.(key, entry.size);
      return;
    }
  }

  private remember(key: K, size: number): void {
    this.ghost.set(key, size);
    this.ghostSize += size;
    for (const [old, oldSize] of this.ghost) {
      if (this.ghostSize <= this.ghostCapacity) break;
      this.ghost.delete(old);
      this.ghostSize -= oldSize;
    }
  }
}

/**
 * Reads segment objects from S3 for the disk cache: whole, one range of bytes, or the Parquet
 * footer at an object's end. Where the bytes go, and what is held, is the cache's business.
 *
 * Each GET is counted in the counters given, and so are the bytes of the bodies read here into
 * memory (a footer's); a body handed back as a stream is counted by whoever writes it out.
 */
import type { Readable } from 'node:stream';
import type { AttachedObject } from '../meta/api.js';
import type { SegmentObjects } from '../common/segment-objects.js';
import type { Range } from './segment-parts.js';

/** How much of an object's end the first GET of a footer read reads: the footer, usually whole. */
export const TAIL_BYTES = 64 * 1024;

/** A footer read: the object itself when all of it came, else its size and its tail, the footer whole. */
export type FetchedFooter =
  | { whole: Buffer; /** Bytes read from S3 for it. */ fetched: number }
  | { size: number; tail: Buffer; /** Bytes read from S3 for it. */ fetched: number };

/** How the segment cache reads a segment's object. */
export interface SegmentFetch {
  /** The whole object, streamed. */
  whole(table: string, id: string): Promise<Readable>;
  /** The object's tail, as far back as its Parquet footer reaches (the whole object when it is small). */
  footer(table: string, id: string): Promise<FetchedFooter>;
  /** Bytes [start, end) of an object of `size` bytes, streamed; throws unless S3 answers with that range. */
  range(table: string, id: string, range: Range, size: number): Promise<Readable>;
}

export interface FetchCounters {
  s3Gets: number;
  bytesFromS3: number;
}

export class S3SegmentFetch implements SegmentFetch {
  constructor(
    private readonly objects: SegmentObjects,
    /** Where attached segments' objects lie, by id; the rest are Berth's own. */
    private readonly attached: ReadonlyMap<string, AttachedObject>,
    private readonly counters: FetchCounters,
  ) {}

  async whole(table: string, id: string): Promise<Readable> {
    const response = await this.objects.get(this.ref(table, id));
    this.counters.s3Gets++;
    return response.Body as Readable;
  }

  async footer(table: string, id: string): Promise<FetchedFooter> {
    const key = this.ref(table, id);
    const first = await this.getRange(key, `bytes=-${TAIL_BYTES}`);
    const { size } = first;
    if (size === undefined) return { whole: first.body, fetched: first.body.length }; // the server sent it all
    const tailStart = size - Math.min(TAIL_BYTES, size);
    // A server that ignores suffix ranges answers from the start: ask for the end by offsets.
    let tail =
      first.start === tailStart ? first.body : (await this.getRange(key, `bytes=${tailStart}-${size - 1}`)).body;
    let fetched = first.body.length + (tail === first.body ? 0 : tail.length);
    if (tail.length === size) return { whole: tail, fetched }; // a small object: all of it came
    const footer =
      tail.length >= 8 && tail.toString('latin1', tail.length - 4) === 'PAR1'
        ? tail.readUInt32LE(tail.length - 8) + 8
        : undefined;
    if (footer === undefined || footer > size)
      throw new Error(`segment ${id} is not a Parquet file (no footer at its end)`);
    if (footer > tail.length) {
      const head = (await this.getRange(key, `bytes=${size - footer}-${size - tail.length - 1}`)).body;
      tail = Buffer.concat([head, tail]);
      fetched += head.length;
    }
    return { size, tail, fetched };
  }

  async range(table: string, id: string, [start, end]: Range, size: number): Promise<Readable> {
    const response = await this.objects.get(this.ref(table, id), `bytes=${start}-${end - 1}`);
    this.counters.s3Gets++;
    if (response.ContentRange !== `bytes ${start}-${end - 1}/${size}`) {
      response.Body?.transformToByteArray().catch(() => {}); // drain: the answer is not the range asked for
      throw new Error(
        `segment ${id}: asked S3 for bytes ${start}-${end - 1} of ${size}, got ${response.ContentRange ?? 'the whole object'}`,
      );
    }
    return response.Body as Readable;
  }

  private ref(table: string, id: string) {
    const object = this.attached.get(id);
    return { table, id, ...(object ? { object } : {}) };
  }

  /** One ranged GET: its bytes, and where they start in an object of what size when the answer says so (a 206). */
  private async getRange(
    segment: ReturnType<S3SegmentFetch['ref']>,
    range: string,
  ): Promise<{ body: Buffer; start?: number; size?: number }> {
    const response = await this.objects.get(segment, range);
    this.counters.s3Gets++;
    const body = Buffer.from(await response.Body!.transformToByteArray());
    this.counters.bytesFromS3 += body.length;
    const answered = /^bytes (\d+)-\d+\/(\d+)$/.exec(response.ContentRange ?? '');
    return answered ? { body, start: Number(answered[1]), size: Number(answered[2]) } : { body };
  }
}

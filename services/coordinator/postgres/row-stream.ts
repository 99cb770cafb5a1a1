/**
 * A query's answer pulled row by row: the query pushes batches in (as the NDJSON answer's sink,
 * execution/streamed-answer.ts) and each push resolves only once the session has taken every
 * row of it, so DuckDB computes no further ahead than the client reads. A portal suspended by an
 * Execute row limit simply leaves the query waiting here until the next Execute.
 */
import type { JsonValue } from '../api.js';

/** The sink a query streams its answer into: the same shape as the HTTP front's. */
export interface AnswerSink {
  start(columns: string[], types: string[], signal: AbortSignal): Promise<void>;
  rows(batch: JsonValue[][]): Promise<void>;
  notice?(words: string): void;
}

export class RowStream implements AnswerSink {
  header?: { columns: string[]; types: string[] };
  private batch: JsonValue[][] = [];
  private at = 0;
  private taken?: () => void;
  private wake?: () => void;
  private finished = false;
  private failure: unknown;
  private signal?: AbortSignal;

  /** Runs the query into this stream; its end (or failure) ends the stream. `notice` hears what it waits for. */
  constructor(
    run: (sink: AnswerSink) => Promise<unknown>,
    readonly notice?: (words: string) => void,
  ) {
    run(this).then(
      () => this.finish(undefined),
      (error: unknown) => this.finish(error ?? new Error('the query failed')),
    );
  }

  async start(columns: string[], types: string[], signal: AbortSignal): Promise<void> {
    this.header = { columns, types };
    this.signal = signal;
    this.notify();
  }

  async rows(batch: JsonValue[][]): Promise<void> {
    if (batch.length === 0) return;
    this.batch = batch;
    this.at = 0;
    // A query stopped while its rows wait to be taken (a cancel, the deadline) stops waiting.
    const signal = this.signal;
    signal?.throwIfAborted();
    await new Promise<void>((resolve, reject) => {
      const stopped = () => reject(signal!.reason);
      signal?.addEventListener('abort', stopped, { once: true });
      this.taken = () => {
        signal?.removeEventListener('abort', stopped);
        resolve();
      };
      this.notify();
    });
  }

  /** The columns, once the query has them; throws the query's error when it failed first. */
  async columns(): Promise<{ columns: string[]; types: string[] }> {
    while (!this.header && !this.finished) await this.wait();
    if (this.header) return this.header;
    throw this.failure ?? new Error('the query ended without columns');
  }

  /** The next row, or undefined at the end; throws the query's error. */
  async next(): Promise<JsonValue[] | undefined> {
    for (;;) {
      if (this.at < this.batch.length) return this.batch[this.at++];
      if (this.taken) {
        const release = this.taken;
        this.taken = undefined;
        this.batch = [];
        release();
      }
      if (this.finished) {
        if (this.failure !== undefined) throw this.failure;
        return undefined;
      }
      await this.wait();
    }
  }

  private finish(failure: unknown): void {
    this.finished = true;
    this.failure = failure;
    this.notify();
  }

  private wait(): Promise<void> {
    return new Promise((resolve) => (this.wake = resolve));
  }

  private notify(): void {
    const wake = this.wake;
    this.wake = undefined;
    wake?.();
  }
}

/**
 * A query's answer streamed to its client as NDJSON (`Accept: application/x-ndjson`), written as
 * the final stage makes it: a first line with the columns and their types, one line per row (a
 * JSON array, the values as in the JSON answer), and a last line with the stats, or with the error
 * when the query failed after its first line (its status was sent already). A client that reads
 * slowly slows DuckDB down instead of filling the coordinator's memory: each batch is written
 * once the client has taken the one before.
 */
import type { ServerResponse } from 'node:http';
import { httpAnswerOf } from '../../common/errors.js';
import { NDJSON_TYPE, type JsonValue, type QueryStats } from '../api.js';

/**
 * Where a streamed query's answer goes as it is made (the client's connection): the columns
 * first, then its rows batch by batch. Each call resolves once the client has taken what it was
 * given, so DuckDB computes no further ahead than the client reads.
 */
export interface AnswerSink {
  /** `signal` is the query's: a sink waiting on a slow client gives up when it aborts. */
  start(columns: string[], types: string[], signal: AbortSignal): Promise<void>;
  rows(batch: JsonValue[][]): Promise<void>;
  /** Hears, where the client can be told before its answer, what the query waits for (a heavy pool launching). */
  notice?(words: string): void;
}

export class StreamedAnswer implements AnswerSink {
  private raw?: ServerResponse;
  private signal?: AbortSignal;
  /** The last line went out: nothing more may. */
  private ended = false;

  /** `begin` takes the response over from the framework (fastify's reply.hijack) and gives its stream. */
  constructor(private readonly begin: () => ServerResponse) {}

  /** Whether the status went out: after that, an error can only end the stream. */
  get started(): boolean {
    return this.raw !== undefined;
  }

  async start(columns: string[], types: string[], signal: AbortSignal): Promise<void> {
    this.signal = signal;
    this.raw = this.begin();
    this.raw.writeHead(200, { 'content-type': NDJSON_TYPE });
    await this.write(`${JSON.stringify({ columns, types })}\n`);
  }

  async rows(batch: JsonValue[][]): Promise<void> {
    if (batch.length > 0) await this.write(`${batch.map((row) => JSON.stringify(row)).join('\n')}\n`);
  }

  /** The last line: how the query ran. */
  end(stats: QueryStats): void {
    if (this.ended || !this.raw || this.raw.destroyed) return;
    this.ended = true;
    this.raw.end(`${JSON.stringify({ stats })}\n`);
  }

  /** The last line when the query failed after the first: what went wrong, in the words of a 4xx answer where it is the query's fault. */
  fail(error: unknown): void {
    const answer = httpAnswerOf(error);
    const line = answer
      ? { error: answer.code, status: answer.status, message: answer.message }
      : {
          error: 'internal',
          status: 500,
          message: 'the query failed after its first rows (the coordinator logged why)',
        };
    if (this.ended || !this.raw || this.raw.destroyed) return;
    this.ended = true;
    this.raw.end(`${JSON.stringify(line)}\n`);
  }

  /**
   * Writes, then waits until the client has taken it. A client that has gone, or that stopped
   * reading until the query's deadline passed, fails the write: the query stops and its slot and
   * connection are freed (the connection is cut, so the client sees no last line).
   */
  private async write(text: string): Promise<void> {
    const raw = this.raw!;
    const signal = this.signal!;
    signal.throwIfAborted();
    if (this.ended || raw.destroyed) throw new Error('the client went away');
    if (raw.write(text)) return;
    await new Promise<void>((resolve) => {
      const done = () => {
        raw.off('drain', done);
        raw.off('close', done);
        signal.removeEventListener('abort', done);
        resolve();
      };
      raw.on('drain', done);
      raw.on('close', done);
      signal.addEventListener('abort', done, { once: true });
    });
    if (signal.aborted) {
      raw.destroy();
      throw signal.reason;
    }
    if (raw.destroyed) throw new Error('the client went away');
  }
}

/**
 * The final stages a heavy backend runs for coordinators: a heavy query's rows go to one backend of
 * the pool, never to the coordinator, which only relays them (issue 28). Each final stage is an
 * exchange on the node's own final-stage DuckDB (opened on first use, in the node's cache
 * directory, spilling there under its own memory limit): the coordinator opens it, streams each
 * scan's Arrow IPC into it as a part, drops a part cut short, then reads the answer and closes it.
 * One the coordinator abandons (it died, say) is closed once idle for its time to live.
 */
import { randomUUID } from 'node:crypto';
import type { Readable } from 'node:stream';
import { notFound } from '../common/errors.js';
import type { ExchangeInput } from '../common/final-stage/contract.js';
import type { FinalStageEngine } from '../common/final-stage/engine.js';
import type { Exchange, StreamedRows } from '../common/final-stage/exchange.js';
import type { SqlParameter } from '../common/sql-parameters.js';

interface Open {
  exchange: Exchange;
  ttlMs: number;
  timer: NodeJS.Timeout;
  /** Answers being read: close() waits for them to give their connection back first. */
  answering: Set<Promise<void>>;
}

export class FinalStages {
  private readonly open = new Map<string, Open>();
  private engine?: Promise<FinalStageEngine>;
  private opened?: FinalStageEngine;

  constructor(private readonly openEngine: () => Promise<FinalStageEngine>) {}

  /** Rows the scan stage has sent the final stages run here. */
  get rowsReceived(): number {
    return this.opened?.rowsReceived ?? 0;
  }

  /** Opens a final stage with these inputs; it closes by itself after `ttlMs` without a call. */
  async create(inputs: ExchangeInput[], ttlMs: number): Promise<string> {
    // An engine that failed to open is tried again by the next final stage.
    this.engine ??= this.openEngine().then(
      (engine) => (this.opened = engine),
      (error: unknown) => {
        this.engine = undefined;
        throw error;
      },
    );
    const exchange = (await this.engine).openExchange(inputs);
    const id = randomUUID();
    this.open.set(id, { exchange, ttlMs, timer: this.expiry(id, ttlMs), answering: new Set() });
    return id;
  }

  /** Receives one scan's Arrow IPC stream into an input, as a part of its own. */
  receive(id: string, input: string, body: Readable): Promise<{ part: string; rows: number }> {
    return this.touch(id).receive(input, body);
  }

  /** Drops a part a scan cut short had sent: its work is done again elsewhere. */
  discard(id: string, input: string, part: string): Promise<void> {
    return this.touch(id).discard(input, part);
  }

  /** Runs the final SQL over the inputs; its rows come as DuckDB makes them. close() the answer when done. */
  async answer(
    id: string,
    sql: string,
    signal: AbortSignal,
    parameters: readonly SqlParameter[] = [],
  ): Promise<StreamedRows> {
    const exchange = this.touch(id);
    const { answering } = this.open.get(id)!;
    let done = () => {};
    const closed = new Promise<void>((resolve) => (done = resolve));
    answering.add(closed);
    try {
      const rows = await exchange.stream(sql, signal, parameters);
      return {
        ...rows,
        close: () => {
          rows.close();
          answering.delete(closed);
          done();
        },
      };
    } catch (error) {
      answering.delete(closed);
      done();
      throw error;
    }
  }

  async close(id: string): Promise<void> {
    const open = this.open.get(id);
    if (!open) return;
    this.open.delete(id);
    clearTimeout(open.timer);
    // An answer still being read holds a connection over the inputs: dropped after it is given back.
    await Promise.all(open.answering);
    await open.exchange.close();
  }

  async closeAll(): Promise<void> {
    await Promise.all([...this.open.keys()].map((id) => this.close(id)));
    this.opened?.close();
  }

  private touch(id: string): Exchange {
    const open = this.open.get(id);
    if (!open) throw notFound('unknown_final_stage', `no final stage ${id} here: it was closed, or it expired`);
    clearTimeout(open.timer);
    open.timer = this.expiry(id, open.ttlMs);
    return open.exchange;
  }

  private expiry(id: string, ttlMs: number): NodeJS.Timeout {
    const timer = setTimeout(() => void this.close(id), ttlMs);
    timer.unref();
    return timer;
  }
}

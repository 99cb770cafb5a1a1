/**
 * A coordinator's side of the heavy pool's admission. Its heavy queries wait here, in arrival
 * order; the pool workflow decides by counts how many of them may run at once (the grant) and how
 * many may wait (the queue allowance), over every coordinator together. This coordinator:
 * - reports its absolute counts (running, waiting) when they grow, one report in flight at a time
 *   (a burst of any size is one report); a drop a little later (a slot freed and taken again at
 *   once costs nothing); and every `heartbeatMs` while it has queries on the pool, so the pool can
 *   tell a live coordinator from a dead one;
 * - reads its admission (a Temporal query: no history) every `pollMs` while queries wait;
 * - never runs more than min(its last grant, the demand it last reported): the pool only takes a
 *   grant back when the coordinator itself reports less demand, so the group is never oversubscribed;
 * - answers "queue full" (429) past the allowance, and fails waiting queries with the pool's own
 *   words when their queue timeout passes, when a launch fails, or when Temporal is unreachable.
 */
import type { AdmissionAnswer, PoolPhase } from '../../../workflows/contracts/heavy-pool.js';
import { HttpError } from '../../common/errors.js';

/** The pool, as the admission sees it: report counts, read the answer (both through Temporal). */
export interface PoolGate {
  report(counts: { running: number; waiting: number; epoch?: number }): Promise<AdmissionAnswer>;
  read(): Promise<AdmissionAnswer>;
  /** Where Temporal is, for error messages. */
  describe: string;
}

/** How long a heavy query may wait for the pool, and how often its admission is read, unless the coordinator is told otherwise. */
export const HEAVY_ADMISSION_DEFAULTS = { queueTimeoutMs: 1_200_000, pollMs: 250 };

export interface HeavyAdmissionOptions {
  gate: PoolGate;
  maxQueueSize: number;
  /** A query waiting longer than this is answered 503 with what the pool is waiting for. @default 1200000 */
  queueTimeoutMs?: number;
  /** How often the admission is read while queries wait. @default 250 */
  pollMs?: number;
  /** How often a coordinator with queries on the pool reports anyway. @default 30000 */
  heartbeatMs?: number;
  /** How long a drop in demand waits before it is reported (a freed slot taken again costs nothing). @default 100 */
  releaseDelayMs?: number;
  onError?: (error: Error) => void;
}

/** A query admitted to the pool: run it on `backends`, then release it. */
export interface Admission {
  backends: string[];
  waitedMs: number;
  release(): void;
}

interface Waiter {
  seq: number;
  enqueuedAt: number;
  resolve(admission: Admission): void;
  reject(error: Error): void;
  timer: NodeJS.Timeout;
  signal?: AbortSignal;
  onAbort?: () => void;
  /** Told what the query waits for, each time that changes. */
  onWait?: (words: string) => void;
  told?: string;
}

export class HeavyAdmission {
  private readonly waiting: Waiter[] = [];
  private running = 0;
  private seq = 0;
  /** Never run more than this: min(last grant, demand last reported). */
  private ceiling = 0;
  private answer: AdmissionAnswer | undefined;
  private epoch: number | undefined;
  private reporting: Promise<void> | undefined;
  private dirty = false;
  private lazyReport: NodeJS.Timeout | undefined;
  private sent = { demand: 0, lastSeq: 0 };
  private pollTimer: NodeJS.Timeout | undefined;
  private readonly heartbeat: NodeJS.Timeout;
  private closed = false;

  constructor(private readonly options: HeavyAdmissionOptions) {
    this.heartbeat = setInterval(() => {
      if (this.running + this.waiting.length > 0) this.sync(true);
    }, options.heartbeatMs ?? 30_000);
    this.heartbeat.unref();
  }

  /** This coordinator's own counts. */
  get counts(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.waiting.length };
  }

  /**
   * Waits for a place on the pool; rejects with an HttpError (429, 503) that says why not.
   * `onWait` hears what the query waits for (the pool launching and the layer it is at, or a slot)
   * each time that changes.
   */
  admit(signal?: AbortSignal, onWait?: (words: string) => void): Promise<Admission> {
    if (this.closed) return Promise.reject(new HttpError(503, 'shutting_down', 'the coordinator is shutting down'));
    // A full queue answers at once; the pool's allowance (in the next answer) is the authority.
    const known = this.answer;
    const unreported = this.waiting.filter((w) => w.seq > this.sent.lastSeq).length;
    const startsNow = this.waiting.length === 0 && this.running < this.ceiling && known?.serveReady;
    if (known && !startsNow && known.waiting + unreported >= this.options.maxQueueSize)
      return Promise.reject(queueFull(this.options.maxQueueSize, known));
    return new Promise<Admission>((resolve, reject) => {
      const waiter: Waiter = {
        seq: ++this.seq,
        enqueuedAt: performance.now(),
        resolve,
        reject,
        signal,
        onWait,
        timer: setTimeout(
          () => this.drop(waiter, this.timedOut(waiter)),
          this.options.queueTimeoutMs ?? HEAVY_ADMISSION_DEFAULTS.queueTimeoutMs,
        ),
      };
      if (signal) {
        waiter.onAbort = () =>
          this.drop(waiter, new HttpError(499, 'client_closed', 'the client went away while its heavy query waited'));
        signal.addEventListener('abort', waiter.onAbort, { once: true });
      }
      this.waiting.push(waiter);
      this.pump();
      this.sync();
    });
  }

  /** Stops reporting and polling; waiting queries are answered 503. */
  close(): void {
    this.closed = true;
    clearInterval(this.heartbeat);
    clearTimeout(this.pollTimer);
    clearTimeout(this.lazyReport);
    for (const w of [...this.waiting])
      this.drop(w, new HttpError(503, 'shutting_down', 'the coordinator is shutting down'));
  }

  /** Starts waiting queries while the ceiling allows. */
  private pump(): void {
    while (this.waiting.length > 0 && this.running < this.ceiling && this.answer?.serveReady) {
      const waiter = this.waiting.shift()!;
      this.settle(waiter);
      this.running++;
      let released = false;
      waiter.resolve({
        backends: this.answer.backends,
        waitedMs: Math.round(performance.now() - waiter.enqueuedAt),
        release: () => {
          if (released) return;
          released = true;
          this.running--;
          this.pump();
          this.sync();
        },
      });
    }
  }

  /**
   * Tells the pool that the counts changed. More demand (or a heartbeat) is reported at once; less
   * after `releaseDelayMs`, so a slot freed and taken again at once costs no report at all.
   */
  private sync(now = false): void {
    if (this.closed) return;
    const demand = this.running + this.waiting.length;
    if (now || demand > this.sent.demand) return this.report();
    if (demand === this.sent.demand) return;
    this.lazyReport ??= setTimeout(() => {
      this.lazyReport = undefined;
      if (this.running + this.waiting.length !== this.sent.demand) this.report();
    }, this.options.releaseDelayMs ?? 100);
    this.lazyReport.unref();
  }

  /** Reports the counts now, unless a report is in flight (then right after it). */
  private report(): void {
    clearTimeout(this.lazyReport);
    this.lazyReport = undefined;
    this.dirty = true;
    this.reporting ??= (async () => {
      try {
        while (this.dirty && !this.closed) {
          this.dirty = false;
          const counts = { running: this.running, waiting: this.waiting.length, epoch: this.epoch };
          const sent = { demand: counts.running + counts.waiting, lastSeq: this.seq };
          // Until this report is answered, run no more than it asks for.
          this.ceiling = Math.min(this.ceiling, sent.demand);
          this.sent = sent;
          this.apply(await this.options.gate.report(counts));
        }
      } catch (error) {
        this.unreachable(error as Error);
      } finally {
        this.reporting = undefined;
      }
      this.sync(); // what changed while the report was in flight
    })();
  }

  private apply(answer: AdmissionAnswer): void {
    if (this.epoch !== undefined && answer.epoch > this.epoch && answer.lastFailure && !answer.serveReady) {
      // A launch failed: every query waiting for it gets the pool's reason.
      for (const w of [...this.waiting])
        this.drop(w, new HttpError(503, 'pool_launch_failed', answer.lastFailure.message), false);
    }
    this.epoch = answer.epoch;
    this.answer = answer;
    this.ceiling = Math.min(answer.grant, this.sent.demand);
    // Past the queue allowance: the newest of the reported waiting queries are refused.
    const reported = this.waiting.filter((w) => w.seq <= this.sent.lastSeq);
    for (const w of reported.slice(answer.queued).reverse())
      this.drop(w, queueFull(this.options.maxQueueSize, answer), false);
    this.pump();
    const words = answer.serveReady
      ? `waiting for a slot of the heavy pool (${answer.running} running, ${answer.waiting} waiting)`
      : `the heavy pool is launching: ${answer.notReady ?? phaseWords(answer.phase)}`;
    for (const w of this.waiting) {
      if (w.onWait && w.told !== words) {
        w.told = words;
        w.onWait(words);
      }
    }
    this.schedulePoll();
  }

  /** While queries wait and no report is due, read the admission (no history) every pollMs. */
  private schedulePoll(): void {
    clearTimeout(this.pollTimer);
    if (this.waiting.length === 0 || this.closed) return;
    this.pollTimer = setTimeout(async () => {
      if (this.reporting) return this.schedulePoll();
      try {
        this.apply(await this.options.gate.read());
      } catch (error) {
        this.unreachable(error as Error);
      }
    }, this.options.pollMs ?? HEAVY_ADMISSION_DEFAULTS.pollMs);
    this.pollTimer.unref();
  }

  /** Temporal cannot be reached: queries waiting for the pool cannot be admitted, so they are answered now. */
  private unreachable(error: Error): void {
    this.options.onError?.(error);
    const answer = new HttpError(
      503,
      'pool_unavailable',
      `the heavy pool cannot be reached (Temporal at ${this.options.gate.describe}): ${error.message.split('\n')[0]}`,
      { 'retry-after': '10' },
    );
    for (const w of [...this.waiting]) this.drop(w, answer, false);
    this.ceiling = 0;
    this.answer = undefined;
    this.epoch = undefined;
  }

  private timedOut(waiter: Waiter): HttpError {
    const seconds = Math.round((performance.now() - waiter.enqueuedAt) / 1000);
    const why = this.answer?.serveReady
      ? `all ${this.answer.running} of its slots stayed busy`
      : `the pool is not ready: ${this.answer?.notReady ?? phaseWords(this.answer?.phase)}`;
    return new HttpError(503, 'queue_timeout', `waited ${seconds} s for the heavy pool; ${why}`, {
      'retry-after': '30',
    });
  }

  /** Takes a waiting query out of line with an answer; tells the pool unless the caller will. */
  private drop(waiter: Waiter, error: Error, report = true): void {
    const i = this.waiting.indexOf(waiter);
    if (i < 0) return;
    this.waiting.splice(i, 1);
    this.settle(waiter);
    waiter.reject(error);
    if (report) this.sync();
    if (this.waiting.length === 0) clearTimeout(this.pollTimer);
  }

  private settle(waiter: Waiter): void {
    clearTimeout(waiter.timer);
    if (waiter.onAbort) waiter.signal?.removeEventListener('abort', waiter.onAbort);
  }
}

const phaseWords = (phase: PoolPhase | undefined) => (phase ? `it is ${phase}` : 'it has not answered yet');

function queueFull(maxQueueSize: number, answer: AdmissionAnswer): HttpError {
  return new HttpError(
    429,
    'queue_full',
    `the heavy pool's queue is full (${maxQueueSize} queries waiting, ${answer.running} running): try again later`,
    { 'retry-after': answer.serveReady ? '5' : '30' },
  );
}

/**
 * Admission to the serving group on this coordinator, by the rules of a workload group (as the
 * heavy pool's admission has them, core/admission.ts, here for one coordinator alone): at most
 * `maxConcurrency` queries run at once, at most `maxQueueSize` wait, in arrival order, and none
 * waits longer than `queueTimeoutMs`. A query past the queue, or one whose wait runs out, is
 * answered 429 with a Retry-After at once, instead of waiting behind work the group cannot do in
 * time: under overload the queries admitted keep their latency, and the others are told to come
 * back rather than time out.
 */
import { DEFAULT_SERVING_GROUP } from '../../common/config.js';
import { HttpError } from '../../common/errors.js';

/** The serving group's workload rules unless the coordinator is told otherwise. */
export const SERVING_ADMISSION_DEFAULTS = { maxConcurrency: 16, maxQueueSize: 16, queueTimeoutMs: 10_000 };

export interface ServingAdmissionOptions {
  /** Queries running at once. @default 16 */
  maxConcurrency?: number;
  /** Queries waiting for a slot; past them, 429. @default 16 */
  maxQueueSize?: number;
  /** Longest wait for a slot; past it, 429. @default 10000 */
  queueTimeoutMs?: number;
  /** What the 429s tell clients to wait, in seconds. @default 1 */
  retryAfterSeconds?: number;
  /** The group's name, for messages. @default 'serving' */
  group?: string;
}

/** A query in line: started when a slot passes to it, or taken out of line with an answer. */
interface Waiter {
  start(): void;
  refuse(reason: unknown): void;
}

/**
 * The line is kept here rather than in p-limit: a query must leave it the moment its wait runs
 * out or its client leaves, so that the queue's length is exactly the queries still waiting.
 */
export class ServingAdmission {
  private running = 0;
  private readonly line: Waiter[] = [];

  constructor(private readonly options: ServingAdmissionOptions = {}) {}

  get counts(): { running: number; waiting: number } {
    return { running: this.running, waiting: this.line.length };
  }

  get maxConcurrency(): number {
    return this.options.maxConcurrency ?? SERVING_ADMISSION_DEFAULTS.maxConcurrency;
  }

  get maxQueueSize(): number {
    return this.options.maxQueueSize ?? SERVING_ADMISSION_DEFAULTS.maxQueueSize;
  }

  /**
   * Runs `work` in a slot: at once when one is free, else after waiting in line. Rejects with a
   * 429 when the line is full or the wait runs out, and with the signal's reason as soon as it
   * aborts; the slot stays taken until the work itself (given the same signal) has stopped.
   */
  async run<T>(signal: AbortSignal, work: () => Promise<T>): Promise<T> {
    signal.throwIfAborted();
    if (this.running < this.maxConcurrency) this.running++;
    else await this.wait(signal);
    const done = (async () => await work())();
    done.then(
      () => this.release(),
      () => this.release(),
    );
    let aborted = () => {};
    const abandoned = new Promise<never>((_, reject) => {
      aborted = () => reject(signal.reason);
      signal.addEventListener('abort', aborted, { once: true });
    });
    abandoned.catch(() => {});
    try {
      return await Promise.race([done, abandoned]);
    } finally {
      signal.removeEventListener('abort', aborted);
    }
  }

  /** The slot passes to the first in line, or is given back. */
  private release(): void {
    const next = this.line.shift();
    if (next) next.start();
    else this.running--;
  }

  /** Waits in line until a slot passes to this query. */
  private wait(signal: AbortSignal): Promise<void> {
    if (this.line.length >= this.maxQueueSize) {
      return Promise.reject(
        this.refusal(
          'queue_full',
          `the ${this.group} group's queue is full (${this.maxQueueSize} queries waiting, ${this.running} running)`,
        ),
      );
    }
    const timeoutMs = this.options.queueTimeoutMs ?? SERVING_ADMISSION_DEFAULTS.queueTimeoutMs;
    return new Promise<void>((resolve, reject) => {
      const leave = () => {
        clearTimeout(timer);
        signal.removeEventListener('abort', aborted);
        const i = this.line.indexOf(waiter);
        if (i >= 0) this.line.splice(i, 1);
      };
      const waiter: Waiter = {
        start: () => {
          leave();
          resolve();
        },
        refuse: (reason) => {
          leave();
          reject(reason);
        },
      };
      const aborted = () => waiter.refuse(signal.reason);
      const timer = setTimeout(
        () =>
          waiter.refuse(
            this.refusal(
              'queue_timeout',
              `waited ${timeoutMs} ms for one of the ${this.group} group's ${this.maxConcurrency} slots`,
            ),
          ),
        timeoutMs,
      );
      signal.addEventListener('abort', aborted, { once: true });
      this.line.push(waiter);
    });
  }

  private get group(): string {
    return this.options.group ?? DEFAULT_SERVING_GROUP;
  }

  private refusal(code: string, message: string): HttpError {
    const retryAfter = this.options.retryAfterSeconds ?? 1;
    return new HttpError(429, code, `${message}: try again in ${retryAfter} s`, { 'retry-after': String(retryAfter) });
  }
}

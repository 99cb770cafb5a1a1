/**
 * The frame of a long activity step. It heartbeats with the step's progress details (the Web UI
 * shows them on the pending activity; a retry finds them in `heartbeatDetails`), so a worker that
 * dies mid-step is noticed within the heartbeat timeout rather than the whole start-to-close
 * timeout. It hands the step an AbortSignal that fires when Temporal cancels the activity (the
 * workflow was cancelled, the heartbeat timed out, the worker is shutting down past its grace time)
 * for every fetch, S3 call and DuckDB query to take. And it can keep a lease alive for as long as
 * the step runs, aborting the step if another holder took it.
 */
import { Context } from '@temporalio/activity';
import { ApplicationFailure } from '@temporalio/common';
import { LEASE_LOST } from '../workflows/contracts/segment-merge.js';

export interface LongStep {
  /** Aborted when the activity is cancelled or its lease is lost; `reason` says which. */
  signal: AbortSignal;
  /** The details the next heartbeats carry. */
  progress(details: Record<string, unknown>): void;
  /** The same, sent in a heartbeat at once: a milestone a retry should find (it reads the last details). */
  checkpoint(details: Record<string, unknown>): void;
}

export interface KeptLease {
  name: string;
  /** How often to renew it. */
  everyMs: number;
  /** Renews the lease; false when another holder has it now. */
  renew(): Promise<boolean>;
}

export interface LongStepOptions {
  /** @default 1000 */
  heartbeatEveryMs?: number;
  /** A lease renewed while the step runs. A renewal that fails (meta unreachable) is tried again next time. */
  lease?: KeptLease;
}

export async function runLongStep<T>(work: (step: LongStep) => Promise<T>, options: LongStepOptions = {}): Promise<T> {
  const context = Context.current();
  const leaseLost = new AbortController();
  const signal = AbortSignal.any([context.cancellationSignal, leaseLost.signal]);
  let details: Record<string, unknown> | undefined;
  const heartbeat = () => context.heartbeat(details);
  heartbeat();
  const heartbeats = setInterval(heartbeat, options.heartbeatEveryMs ?? 1_000);

  let renewals: NodeJS.Timeout | undefined;
  const lease = options.lease;
  const lost = () =>
    ApplicationFailure.nonRetryable(`lease ${lease!.name} was taken by another holder while this step ran`, LEASE_LOST);
  const renewLater = () => {
    renewals = setTimeout(() => {
      void lease!.renew().then(
        (held) => (held ? renewLater() : leaseLost.abort(lost())),
        () => renewLater(), // meta unreachable: try again next time; the TTL covers two misses
      );
    }, lease!.everyMs);
  };

  try {
    if (lease) {
      // Renewed first: a step never starts on a lease it no longer holds.
      if (!(await lease.renew())) throw lost();
      renewLater();
    }
    return await work({
      signal,
      progress: (next) => (details = next),
      checkpoint: (next) => {
        details = next;
        heartbeat();
      },
    });
  } catch (error) {
    // Whatever the step threw on its way out, say why it was stopped.
    if (signal.aborted) throw signal.reason;
    throw error;
  } finally {
    clearInterval(heartbeats);
    clearTimeout(renewals);
  }
}

/** Heartbeats every `everyMs` while `work` runs: runLongStep for steps that report no progress. */
export function withHeartbeats<T>(work: () => Promise<T>, everyMs = 1_000): Promise<T> {
  return runLongStep(() => work(), { heartbeatEveryMs: everyMs });
}

import { Context } from '@temporalio/activity';

/**
 * Runs an activity's work while heartbeating every `everyMs`, so that a worker that dies mid-step
 * is noticed within the heartbeat timeout instead of the whole start-to-close timeout.
 */
export async function withHeartbeats<T>(work: () => Promise<T>, everyMs = 1_000): Promise<T> {
  const context = Context.current();
  const timer = setInterval(() => context.heartbeat(), everyMs);
  try {
    return await work();
  } finally {
    clearInterval(timer);
  }
}

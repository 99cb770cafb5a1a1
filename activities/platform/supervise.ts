/**
 * Keeps a process `berth up` runs going (a Berth service, the Temporal dev server, SeaweedFS): one
 * that exits without being stopped is started again where it listened before, after a backoff and
 * with a line on the console; one that keeps exiting is given up on, and `berth up` stops
 * everything and exits non-zero. Meanwhile the services answer 503s naming what is down (ingest:
 * S3; heavy queries: Temporal), never a 500.
 */
export interface Server {
  /** Settles when the server exits, with how it exited (`code 1`, `signal SIGKILL`). */
  exited: Promise<string>;
  stop(): Promise<void>;
}

export interface Supervision {
  log(line: string): void;
  /** The server kept exiting, or could not be started again: `berth up` should stop everything. */
  giveUp(error: Error): void;
  /** Waits before each restart; past the last, the server is given up on. @default 1 s, 2 s, 4 s, 8 s, 16 s */
  backoffMs?: number[];
  /** A run that lasted this long resets the backoff. @default 60000 */
  healthyAfterMs?: number;
}

export interface Supervised<T extends Server> {
  /** The server running now (a new one after each restart). */
  readonly current: T;
  /** Stops the server for good: no restart follows. */
  stop(): Promise<void>;
}

/**
 * Supervises `first`, restarting it with `restart` (which must listen where `first` did);
 * `where` names a restarted server's address for the console.
 */
export function supervise<T extends Server>(
  name: string,
  first: T,
  restart: () => Promise<T>,
  supervision: Supervision,
  where?: (server: T) => string,
): Supervised<T> {
  const backoff = supervision.backoffMs ?? [1_000, 2_000, 4_000, 8_000, 16_000];
  let current: T = first;
  let stopping = false;
  let failures = 0;
  const watch = (watched: T, startedAt: number): void => {
    void watched.exited.then(async (how) => {
      if (stopping) return;
      if (Date.now() - startedAt >= (supervision.healthyAfterMs ?? 60_000)) failures = 0;
      const wait = backoff[failures++];
      if (wait === undefined) {
        supervision.giveUp(new Error(`${name} exited (${how}) ${failures} times in a row`));
        return;
      }
      supervision.log(`${name} exited (${how}); restarting it in ${wait / 1000} s (${failures} of ${backoff.length})`);
      await new Promise((resolve) => setTimeout(resolve, wait));
      if (stopping) return;
      try {
        current = await restart();
      } catch (error) {
        if (!stopping)
          supervision.giveUp(
            new Error(`${name} could not be restarted: ${(error as Error).message}`, { cause: error }),
          );
        return;
      }
      if (stopping) {
        await current.stop();
        return;
      }
      supervision.log(`${name} restarted${where ? ` at ${where(current)}` : ''}`);
      watch(current, Date.now());
    });
  };
  watch(first, Date.now());
  return {
    get current() {
      return current;
    },
    stop: async () => {
      stopping = true;
      await current.stop();
    },
  };
}

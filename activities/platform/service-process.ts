/**
 * A Berth service run as a child process of `berth up`: its log goes to a file, and its first
 * stdout line (`{"service", "url"}`) tells the parent where it listens. `berth up` supervises it:
 * a child that dies is started again after a backoff (on the port it announced, so its URL holds),
 * with a line in the log; one that keeps dying is given up on, and `berth up` stops everything.
 * Its stdin is a pipe from `berth up`: when `berth up` is gone, however it went, the child exits
 * (services/common/startup.ts).
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { SUPERVISED_ENV } from '../../services/common/startup.js';

export interface ServiceProcess {
  name: string;
  url: string;
  /** Extra fields of the announcement (a query node's id). */
  announced: Record<string, unknown>;
  /** The running process (a new one after each restart). */
  readonly child: ChildProcess;
  /** Resolves with the exit code when the current process ends, for whatever reason. */
  readonly exited: Promise<number | null>;
  /** Stops the service for good: no restart follows. */
  stop(): Promise<void>;
}

export interface Supervision {
  /** The variable that sets the service's port, so that a restart listens where the first run did. */
  portVariable?: string;
  /** Waits before each restart; past the last, the service is given up on. @default 1 s, 2 s, 4 s, 8 s, 16 s */
  backoffMs?: number[];
  /** A run that lasted this long resets the backoff. @default 60000 */
  healthyAfterMs?: number;
  log(line: string): void;
  /** The service kept dying: `berth up` should stop everything and exit non-zero. */
  giveUp(error: Error): void;
}

/** Where each service's compiled entry point lives. */
export const SERVICE_SCRIPTS = {
  meta: fileURLToPath(new URL('../../services/meta/main.js', import.meta.url)),
  coordinator: fileURLToPath(new URL('../../services/coordinator/main.js', import.meta.url)),
  'query-node': fileURLToPath(new URL('../../services/query-node/main.js', import.meta.url)),
  worker: fileURLToPath(new URL('../../workers/main.js', import.meta.url)),
  controller: fileURLToPath(new URL('../../services/controller/main.js', import.meta.url)),
} as const;

interface Run {
  child: ChildProcess;
  exited: Promise<number | null>;
  announcement: Record<string, unknown>;
}

/** Starts the script once and waits for its announcement. */
async function run(
  name: string,
  script: string,
  env: Record<string, string>,
  logFile: string,
  startTimeoutMs: number,
): Promise<Run> {
  const child = spawn(process.execPath, [script], {
    env: { ...process.env, ...env, [SUPERVISED_ENV]: '1' },
    stdio: ['pipe', 'pipe', 'pipe'],
  });
  const log = createWriteStream(logFile, { flags: 'a', mode: 0o600 });
  child.stderr!.pipe(log);
  const lines = createInterface({ input: child.stdout! });
  const exited = new Promise<number | null>((resolve) =>
    child.once('exit', (code) => {
      log.end();
      resolve(code);
    }),
  );
  const announcement = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(
      () => reject(new Error(`${name} did not start within ${startTimeoutMs} ms; see ${logFile}`)),
      startTimeoutMs,
    );
    lines.on('line', (line) => {
      if (!log.writableEnded) log.write(`${line}\n`);
      try {
        const parsed = JSON.parse(line) as Record<string, unknown>;
        if (typeof parsed.url === 'string' && parsed.service) {
          clearTimeout(timer);
          resolve(parsed);
        }
      } catch {
        // an ordinary log line
      }
    });
    void exited.then(async (code) => {
      clearTimeout(timer);
      const tail = (await readFile(logFile, 'utf8').catch(() => '')).split('\n').slice(-5).join('\n');
      reject(new Error(`${name} exited with code ${code} while starting:\n${tail}`));
    });
  });
  return { child, exited, announcement };
}

export async function startServiceProcess(
  name: string,
  script: string,
  env: Record<string, string>,
  logFile: string,
  supervision?: Supervision,
  startTimeoutMs = 60_000,
): Promise<ServiceProcess> {
  let current = await run(name, script, env, logFile, startTimeoutMs);
  const url = current.announcement.url as string;
  let stopping = false;

  if (supervision) {
    const backoff = supervision.backoffMs ?? [1_000, 2_000, 4_000, 8_000, 16_000];
    const restartEnv = supervision.portVariable ? { ...env, [supervision.portVariable]: new URL(url).port } : env;
    let failures = 0;
    const watch = (watched: Run, startedAt: number): void => {
      void watched.exited.then(async (code) => {
        if (stopping) return;
        const how = code === null ? `signal ${watched.child.signalCode}` : `code ${code}`;
        if (Date.now() - startedAt >= (supervision.healthyAfterMs ?? 60_000)) failures = 0;
        const wait = backoff[failures++];
        if (wait === undefined) {
          supervision.giveUp(new Error(`${name} exited (${how}) ${failures} times in a row; see ${logFile}`));
          return;
        }
        supervision.log(
          `${name} exited (${how}); restarting it in ${wait / 1000} s (${failures} of ${backoff.length})`,
        );
        await new Promise((resolve) => setTimeout(resolve, wait));
        if (stopping) return;
        try {
          current = await run(name, script, restartEnv, logFile, startTimeoutMs);
          if (stopping) {
            current.child.kill('SIGTERM');
            return;
          }
          supervision.log(`${name} restarted at ${current.announcement.url as string}`);
          watch(current, Date.now());
        } catch (error) {
          if (!stopping) supervision.giveUp(error as Error);
        }
      });
    };
    watch(current, Date.now());
  }

  return {
    name,
    url,
    announced: current.announcement,
    get child() {
      return current.child;
    },
    get exited() {
      return current.exited;
    },
    stop: async () => {
      stopping = true;
      const { child, exited } = current;
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
    },
  };
}

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
import { supervise, type Server, type Supervised, type Supervision } from './supervise.js';

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

export interface ServiceSupervision extends Supervision {
  /** The variable that sets the service's port, so that a restart listens where the first run did. */
  portVariable?: string;
}

/** How long a stopped service may drain before it is killed: Kubernetes' default grace period. */
export const STOP_GRACE_MS = 30_000;

/** Where each service's compiled entry point lives. */
export const SERVICE_SCRIPTS = {
  meta: fileURLToPath(new URL('../../services/meta/main.js', import.meta.url)),
  coordinator: fileURLToPath(new URL('../../services/coordinator/main.js', import.meta.url)),
  'query-node': fileURLToPath(new URL('../../services/query-node/main.js', import.meta.url)),
  worker: fileURLToPath(new URL('../../workers/main.js', import.meta.url)),
  controller: fileURLToPath(new URL('../../services/controller/main.js', import.meta.url)),
} as const;

/** One run of the script: a process that announced itself. */
interface Run extends Server {
  child: ChildProcess;
  code: Promise<number | null>;
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
  return {
    child,
    code: exited,
    announcement,
    exited: exited.then((code) => (code === null ? `signal ${child.signalCode}` : `code ${code}`)),
    stop: async () => {
      if (child.exitCode !== null || child.signalCode !== null) return void (await exited);
      // As Kubernetes does: SIGTERM, then SIGKILL for a drain past the grace period.
      child.kill('SIGTERM');
      const kill = setTimeout(() => child.kill('SIGKILL'), STOP_GRACE_MS);
      await exited;
      clearTimeout(kill);
    },
  };
}

export async function startServiceProcess(
  name: string,
  script: string,
  env: Record<string, string>,
  logFile: string,
  supervision?: ServiceSupervision,
  startTimeoutMs = 60_000,
): Promise<ServiceProcess> {
  const first = await run(name, script, env, logFile, startTimeoutMs);
  const url = first.announcement.url as string;
  const restartEnv = supervision?.portVariable ? { ...env, [supervision.portVariable]: new URL(url).port } : env;
  const runs: Supervised<Run> = supervision
    ? supervise(
        name,
        first,
        () => run(name, script, restartEnv, logFile, startTimeoutMs),
        { ...supervision, giveUp: (error) => supervision.giveUp(new Error(`${error.message}; see ${logFile}`)) },
        (restarted) => restarted.announcement.url as string,
      )
    : { current: first, stop: () => first.stop() };
  return {
    name,
    url,
    announced: first.announcement,
    get child() {
      return runs.current.child;
    },
    get exited() {
      return runs.current.code;
    },
    stop: () => runs.stop(),
  };
}

/**
 * A Berth service run as a child process of `berth up`: its log goes to a file, and its first
 * stdout line (`{"service", "url"}`) tells the parent where it listens.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { createWriteStream } from 'node:fs';
import { readFile } from 'node:fs/promises';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';

export interface ServiceProcess {
  name: string;
  url: string;
  /** Extra fields of the announcement (a query node's id). */
  announced: Record<string, unknown>;
  child: ChildProcess;
  /** Resolves with the exit code when the process ends, for whatever reason. */
  exited: Promise<number | null>;
  stop(): Promise<void>;
}

/** Where each service's compiled entry point lives. */
export const SERVICE_SCRIPTS = {
  meta: fileURLToPath(new URL('../../services/meta/main.js', import.meta.url)),
  coordinator: fileURLToPath(new URL('../../services/coordinator/main.js', import.meta.url)),
  'query-node': fileURLToPath(new URL('../../services/query-node/main.js', import.meta.url)),
  worker: fileURLToPath(new URL('../../workers/main.js', import.meta.url)),
  controller: fileURLToPath(new URL('../../services/controller/main.js', import.meta.url)),
} as const;

export async function startServiceProcess(
  name: string,
  script: string,
  env: Record<string, string>,
  logFile: string,
  startTimeoutMs = 60_000,
): Promise<ServiceProcess> {
  const child = spawn(process.execPath, [script], { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const log = createWriteStream(logFile, { flags: 'a' });
  child.stderr!.pipe(log);
  const lines = createInterface({ input: child.stdout! });
  const exited = new Promise<number | null>((resolve) => child.once('exit', resolve));

  const announcement = await new Promise<Record<string, unknown>>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`${name} did not start within ${startTimeoutMs} ms; see ${logFile}`)), startTimeoutMs);
    lines.on('line', (line) => {
      log.write(`${line}\n`);
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
    name,
    url: announcement.url as string,
    announced: announcement,
    child,
    exited,
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM');
      await exited;
      log.end();
    },
  };
}

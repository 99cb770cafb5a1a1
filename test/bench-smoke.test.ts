/**
 * Every benchmark in smoke mode (BERTH_BENCH_SMOKE=1, bench/smoke.ts): `node dist/bench/NAME.js`
 * runs its whole code path at small sizes and must exit 0, so that a bench that no longer runs
 * fails here rather than when someone next runs it. Two run at a time, each in a temporary
 * directory of its own (its TMPDIR), and each child's process group ends with its test.
 */
import type { ChildProcess } from 'node:child_process';
import { existsSync } from 'node:fs';
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import pLimit from 'p-limit';
import { describe, inject, it, type TestContext } from 'vitest';
import { signalGroup, spawnOwned } from './helpers/process-groups.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
/** Two benches at a time: on 2 cores, about 0.7 of the time the same benches take one by one. */
const slots = pLimit(2);
/** How much of a bench's output a failure shows (its end). */
const OUTPUT_CHARS = 20_000;

interface Bench {
  name: string;
  /** Its command-line arguments, for a second path through the same bench. */
  args?: string[];
  /** Longest run before the bench is killed and fails; its smoke run takes a small part of it. */
  deadlineMs: number;
  /** Extra environment: the addresses of the run's servers (test/global-setup.ts) that it can use. */
  env?: () => Record<string, string>;
}

const postgres = () => ({ BERTH_BENCH_POSTGRES_URL: inject('postgresUrl') });
// Longest first. The eight with a cluster start their own (bench/bench-cluster.ts): the embedded
// cluster brings its own Temporal and S3, so theirs cannot be the run's.
const BENCHES: Bench[] = [
  { name: 'launch', deadlineMs: 240_000 },
  { name: 'merge', deadlineMs: 240_000 },
  { name: 'scan', deadlineMs: 240_000 },
  { name: 'sequence', deadlineMs: 180_000 },
  { name: 'join', deadlineMs: 180_000 },
  { name: 'load', deadlineMs: 240_000 },
  { name: 'load', args: ['--mix', 'moving'], deadlineMs: 240_000 },
  { name: 'isolation', deadlineMs: 240_000 },
  { name: 'ingest', deadlineMs: 240_000 },
  { name: 'scaling', deadlineMs: 90_000, env: postgres },
  { name: 'meta', deadlineMs: 90_000, env: postgres },
  { name: 'ownership', deadlineMs: 60_000 },
  { name: 'cache', deadlineMs: 60_000 },
];

/** Runs one bench in smoke mode; resolves when it exits 0, rejects with its output otherwise. */
async function runSmoke(bench: Bench, context: TestContext): Promise<void> {
  if (context.signal.aborted) return; // the test ended while this one waited for a slot
  const script = path.join(ROOT, 'dist', 'bench', `${bench.name}.js`);
  if (!existsSync(script)) throw new Error(`${script} is missing: npm run build first`);
  const tmp = await mkdtemp(path.join(os.tmpdir(), `berth-bench-smoke-${bench.name}-`));
  let child: ChildProcess | undefined;
  const kill = () => child && signalGroup(child, 'SIGKILL');
  context.onTestFinished(kill);
  let output = '';
  const keep = (chunk: Buffer) => (output = (output + chunk.toString()).slice(-4 * OUTPUT_CHARS));
  const started = performance.now();
  try {
    child = spawnOwned(process.execPath, [script, ...(bench.args ?? [])], {
      cwd: ROOT,
      env: { ...process.env, ...bench.env?.(), BERTH_BENCH_SMOKE: '1', TMPDIR: tmp },
      stdio: ['ignore', 'pipe', 'pipe'],
    });
    child.stdout!.on('data', keep);
    child.stderr!.on('data', keep);
    const ran = child;
    context.signal.addEventListener('abort', kill);
    let timer: NodeJS.Timeout | undefined;
    const { code, signal } = await new Promise<{ code: number | null; signal: string | null }>((resolve, reject) => {
      timer = setTimeout(() => {
        kill();
        reject(new Error(`bench/${bench.name} ran past ${bench.deadlineMs} ms and was killed`));
      }, bench.deadlineMs);
      ran.once('error', reject);
      ran.once('close', (exitCode, exitSignal) => resolve({ code: exitCode, signal: exitSignal }));
    }).finally(() => clearTimeout(timer));
    if (code !== 0) throw new Error(`bench/${bench.name} exited with ${code ?? signal}`);
    console.log(`bench/${bench.name}: smoke run passed in ${((performance.now() - started) / 1000).toFixed(1)} s`);
  } catch (error) {
    throw new Error(`${(error as Error).message}; the end of its output:\n${output.slice(-OUTPUT_CHARS)}`, {
      cause: error,
    });
  } finally {
    kill();
    await rm(tmp, { recursive: true, force: true });
  }
}

describe.concurrent('every benchmark in smoke mode', () => {
  for (const bench of BENCHES) {
    // The timeout covers the wait for a slot as well as the run.
    it(
      `bench/${[bench.name, ...(bench.args ?? [])].join(' ')} runs to the end and exits 0`,
      { timeout: 600_000 },
      (context) => slots(() => runSmoke(bench, context)),
    );
  }
});

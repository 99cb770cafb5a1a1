/**
 * What every service checks before it serves: a real token. The deploy files ship none (compose
 * requires one, the Kubernetes Secret is empty), and a service given the sample value or a short
 * one exits at once saying why.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { createInterface } from 'node:readline';
import { fileURLToPath } from 'node:url';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { signalGroup, spawnOwned } from './helpers/process-groups.js';

const ROOT = fileURLToPath(new URL('..', import.meta.url));
const META = path.join(ROOT, 'dist/services/meta/main.js');

/** Starts meta with `token`: its exit code and stderr, or its announced URL. */
function startMeta(dir: string, token: string): Promise<{ code: number | null; stderr: string } | { url: string }> {
  const child = spawnOwned(process.execPath, [META], {
    env: { ...process.env, BERTH_TOKEN: token, BERTH_META_DIR: dir, BERTH_META_PORT: '0', BERTH_LOG_LEVEL: 'warn' },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let stderr = '';
  child.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
  return new Promise((resolve) => {
    createInterface({ input: child.stdout! }).once('line', (line) => {
      resolve({ url: (JSON.parse(line) as { url: string }).url });
      signalGroup(child, 'SIGKILL');
    });
    child.once('exit', (code) => resolve({ code, stderr }));
  });
}

describe('a service’s token', () => {
  let dir: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-start-'));
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it.each([
    ['the sample value', 'change-me', /BERTH_TOKEN is the sample value "change-me"/],
    ['a token of 31 bytes', 'x'.repeat(31), /BERTH_TOKEN must be at least 32 bytes .* it is 31/],
    ['an empty token', '', /BERTH_TOKEN must be set/],
  ])('refuses %s at start, and says why', async (_label, token, message) => {
    const outcome = await startMeta(dir, token);
    expect(outcome).toMatchObject({ code: expect.any(Number) });
    expect('code' in outcome && outcome.code).not.toBe(0);
    expect('stderr' in outcome && outcome.stderr).toMatch(message);
  });

  it('starts with a random token of 32 bytes', async () => {
    expect(await startMeta(dir, 'k'.repeat(32))).toMatchObject({ url: expect.stringMatching(/^http:\/\//) });
  });

  it('is required by the deploy files, which ship none', async () => {
    const compose = await readFile(path.join(ROOT, 'docker-compose.yml'), 'utf8');
    const k8s = await readFile(path.join(ROOT, 'deploy/k8s/berth.yaml'), 'utf8');
    expect(compose).toMatch(/BERTH_TOKEN: \$\{BERTH_TOKEN:\?/);
    expect(k8s).toMatch(/BERTH_TOKEN: ""/);
    expect(`${compose}\n${k8s}`).not.toMatch(/BERTH_TOKEN:.*change-me/);
  });
});

describe('a service started by `berth up`', () => {
  it(
    'ends once `berth up` is gone, even with log lines waiting for a reader that is gone too',
    { timeout: 60_000 },
    async () => {
      const dir = await mkdtemp(path.join(os.tmpdir(), 'berth-orphan-'));
      // A service that logs more than its log pipe holds while its supervisor never reads it.
      const service = path.join(dir, 'service.mjs');
      await writeFile(
        service,
        `import { createRequire } from 'node:module';
      import { startService } from ${JSON.stringify(path.join(ROOT, 'dist/services/common/startup.js'))};
      import { loggerOptions } from ${JSON.stringify(path.join(ROOT, 'dist/services/common/logger.js'))};
      const pino = createRequire(${JSON.stringify(path.join(ROOT, 'package.json'))})('pino');
      startService({ BERTH_TOKEN: 'x'.repeat(32) });
      const log = pino(loggerOptions('orphan'));
      for (let i = 0; i < 20000; i++) log.info({ i, padding: 'p'.repeat(200) }, 'a line nobody reads');
      setInterval(() => log.info('still here'), 50);
      process.stderr.write('logged\\n');`,
      );
      // Its supervisor starts it as berth up does (stdin a pipe from it), says its pid, and reads nothing.
      const supervisor = spawnOwned(
        process.execPath,
        [
          '-e',
          `const c = require('node:child_process').spawn(process.execPath, [${JSON.stringify(service)}], {
          env: { ...process.env, BERTH_SUPERVISED: '1', BERTH_LOG_LEVEL: 'info' }, stdio: ['pipe', 'pipe', 'inherit'] });
        c.stdout.pause(); console.log(c.pid);`,
        ],
        { stdio: ['ignore', 'pipe', 'pipe'] },
      );
      try {
        let stderr = '';
        supervisor.stderr!.on('data', (chunk: Buffer) => (stderr += chunk.toString()));
        const pid = Number(
          await new Promise<string>((resolve) => createInterface({ input: supervisor.stdout! }).once('line', resolve)),
        );
        const alive = () => {
          try {
            process.kill(pid, 0);
            return true;
          } catch {
            return false;
          }
        };
        for (let waited = 0; !stderr.includes('logged') && waited < 30_000; waited += 100)
          await new Promise((resolve) => setTimeout(resolve, 100));
        expect(stderr).toContain('logged');
        process.kill(supervisor.pid!, 'SIGKILL');
        for (let waited = 0; alive() && waited < 20_000; waited += 100)
          await new Promise((resolve) => setTimeout(resolve, 100));
        expect(alive(), 'the service outlived its supervisor').toBe(false);
      } finally {
        signalGroup(supervisor, 'SIGKILL');
        await rm(dir, { recursive: true, force: true });
      }
    },
  );
});

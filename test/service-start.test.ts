/**
 * What every service checks before it serves: a real token. The deploy files ship none (compose
 * requires one, the Kubernetes Secret is empty), and a service given the sample value or a short
 * one exits at once saying why.
 */
import { mkdtemp, readFile, rm } from 'node:fs/promises';
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

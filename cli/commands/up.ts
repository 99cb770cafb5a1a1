/**
 * `berth up`: the embedded cluster on one machine, all state under one data dir. For now it runs
 * the Temporal dev server (with its Web UI) and the S3 API; the services join it as they land.
 */
import { mkdir, writeFile } from 'node:fs/promises';
import path from 'node:path';
import { Command, Option } from 'commander';
import { freePort } from '../embedded/free-port.js';
import { startS3Server } from '../embedded/s3-server.js';
import { resolveTemporalCli } from '../embedded/temporal-cli.js';
import { startTemporalDevServer } from '../embedded/temporal-server.js';
import { UsageError } from '../usage-error.js';

export interface Endpoints {
  temporal: string;
  temporalNamespace: string;
  temporalUi: string;
  s3: string;
  bucket: string;
}

interface UpOptions {
  dataDir: string;
  bind: string;
  temporalPort: string;
  temporalUiPort: string;
  s3Port: string;
  bucket: string;
}

export function upCommand(): Command {
  return new Command('up')
    .description('run the embedded cluster until Ctrl-C; a second run on the same data dir resumes')
    .addOption(new Option('--data-dir <dir>', 'where all state lives').default('.berth').env('BERTH_DATA_DIR'))
    .addOption(new Option('--bind <ip>', 'address every server listens on').default('127.0.0.1'))
    .addOption(new Option('--temporal-port <port>', 'Temporal gRPC port (0: any free port)').default('7233'))
    .addOption(new Option('--temporal-ui-port <port>', 'Temporal Web UI port (0: any free port)').default('8233'))
    .addOption(new Option('--s3-port <port>', 'S3 API port (0: any free port)').default('4568'))
    .addOption(new Option('--bucket <name>', 'bucket that holds the segments').default('berth'))
    .action(async (options: UpOptions) => {
      await up(options);
    });
}

async function up(options: UpOptions): Promise<void> {
  const dataDir = path.resolve(options.dataDir);
  await mkdir(path.join(dataDir, 's3'), { recursive: true });
  const say = (line: string) => console.log(`berth up: ${line}`);

  const executable = await resolveTemporalCli({ log: say });
  const temporalPort = port(options.temporalPort, '--temporal-port');
  const uiPort = port(options.temporalUiPort, '--temporal-ui-port') || (await freePort(options.bind));
  const [temporal, s3] = await Promise.all([
    startTemporalDevServer({
      executable,
      ip: options.bind,
      port: temporalPort || undefined,
      uiPort,
      dbFilename: path.join(dataDir, 'temporal.sqlite'),
    }),
    startS3Server({ directory: path.join(dataDir, 's3'), buckets: [options.bucket], address: options.bind, port: port(options.s3Port, '--s3-port') }),
  ]);

  const endpoints: Endpoints = {
    temporal: temporal.address,
    temporalNamespace: temporal.namespace,
    temporalUi: temporal.uiUrl!,
    s3: s3.endpoint,
    bucket: options.bucket,
  };
  await writeFile(path.join(dataDir, 'endpoints.json'), `${JSON.stringify(endpoints, null, 2)}\n`);
  say(`ready; state in ${dataDir}`);
  console.log(JSON.stringify(endpoints, null, 2));
  say('Ctrl-C stops everything');

  await new Promise<void>((resolve) => {
    process.once('SIGINT', resolve);
    process.once('SIGTERM', resolve);
  });
  say('stopping');
  await Promise.all([temporal.stop(), s3.stop()]);
  say('stopped');
}

function port(text: string, flag: string): number {
  const n = Number(text);
  if (!Number.isInteger(n) || n < 0 || n > 65535) throw new UsageError(`${flag}: "${text}" is not a port number`);
  return n;
}

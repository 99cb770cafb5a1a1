/** `berth up`: the embedded cluster on one machine until Ctrl-C; a second run on the same data dir resumes. */
import path from 'node:path';
import { Command, Option } from 'commander';
import { readFile } from 'node:fs/promises';
import { runDemo } from '../demo.js';
import { startEmbeddedCluster, tokenFile } from '../embedded/cluster.js';
import { isPostgresUrl } from '../../services/meta/store.js';
import { UsageError } from '../usage-error.js';
import { SEAWEED_PORT_NAMES } from '../embedded/s3-server.js';
import { parseCount, parsePort, parsePortMap, parseVcpuList } from '../options.js';

const HEAVY_IDLE_DEFAULT = '300000';

interface UpOptions {
  dataDir: string;
  bind: string;
  nodes?: string;
  vcpus: string;
  temporalPort: string;
  temporalUiPort: string;
  s3Port: string;
  seaweedPorts: string;
  metaPort: string;
  metaDatabase?: string;
  coordinatorPort: string;
  postgresPort: string;
  controllerPort: string;
  heavyMax: string;
  heavyIdleMs: string;
  heavyBootDelayMs: string;
  demo?: boolean;
  demoRows: string;
  exit?: boolean;
  json?: boolean;
  bucket: string;
  cacheMb: string;
}

export function upCommand(): Command {
  return new Command('up')
    .description('run the embedded cluster until Ctrl-C; a second run on the same data dir resumes')
    .addOption(new Option('--data-dir <dir>', 'where all state lives').default('.berth').env('BERTH_DATA_DIR'))
    .addOption(new Option('--bind <ip>', 'address every server listens on').default('127.0.0.1'))
    .option('--nodes <n>', 'number of serving query nodes (default: one per --vcpus entry)')
    .addOption(new Option('--vcpus <list>', 'vCPUs each serving node declares, comma-separated').default('4,4,2'))
    .addOption(new Option('--cache-mb <mb>', 'each query node’s cache budget in MiB').default('1024'))
    .addOption(new Option('--temporal-port <port>', 'Temporal gRPC port (0: any free port)').default('7233'))
    .addOption(new Option('--temporal-ui-port <port>', 'Temporal Web UI port (0: any free port)').default('8233'))
    .addOption(new Option('--s3-port <port>', 'S3 API port (0: any free port)').default('4568'))
    .addOption(
      new Option(
        '--seaweed-ports <list>',
        `the S3 server's other ports, NAME=PORT comma-separated (${SEAWEED_PORT_NAMES.filter((n) => n !== 's3').join(', ')}); unnamed or 0: any free port`,
      ).default(''),
    )
    .addOption(new Option('--meta-port <port>', 'meta service port (0: any free port)').default('7400'))
    .option('--meta-database <url>', "meta's store: a postgres://… URL (default: SQLite in the data dir)")
    .addOption(new Option('--coordinator-port <port>', 'coordinator port (0: any free port)').default('7401'))
    .addOption(
      new Option('--postgres-port <port>', "the coordinator's PostgreSQL port (0: any free port)").default('5433'),
    )
    .addOption(new Option('--controller-port <port>', 'heavy-pool controller port (0: any free port)').default('7402'))
    .addOption(new Option('--heavy-max <n>', 'most replicas of the heavy pool (it steps by 2)').default('2'))
    .addOption(
      new Option('--heavy-idle-ms <ms>', 'idle time before the heavy pool parks at zero (the demo: 15000)').default(
        HEAVY_IDLE_DEFAULT,
      ),
    )
    .addOption(
      new Option('--heavy-boot-delay-ms <ms>', 'imitated node provisioning time of a heavy backend').default('2000'),
    )
    .addOption(new Option('--bucket <name>', 'bucket that holds the segments').default('berth'))
    .option(
      '--demo',
      'also run the tour: ingest a month of events, merge, a light query, a heavy query that launches the pool from zero',
    )
    .addOption(new Option('--demo-rows <n>', 'events the demo generates over 30 days').default('1200000'))
    .option('--exit', 'with --demo: stop everything once the demo is done and the pool is parked again')
    .option('--json', 'with --demo: print a machine-readable summary on stdout (progress goes to stderr)')
    .action(async (options: UpOptions) => {
      if ((options.exit || options.json) && !options.demo) throw new UsageError('--exit and --json go with --demo');
      if (options.metaDatabase !== undefined && !isPostgresUrl(options.metaDatabase))
        throw new UsageError(`--meta-database takes a postgres://… URL, not "${options.metaDatabase}"`);
      const say = (line: string) => (options.json ? console.error : console.log)(`berth up: ${line}`);
      // State, logs and the token are for this user only: files 0600, directories 0700.
      process.umask(0o077);
      const dataDir = path.resolve(options.dataDir);
      const cluster = await startEmbeddedCluster({
        dataDir,
        bind: options.bind,
        vcpus: parseVcpuList(options.vcpus, options.nodes),
        cacheBytes: Number(options.cacheMb) * 1024 * 1024,
        temporalPort: parsePort(options.temporalPort, '--temporal-port'),
        temporalUiPort: parsePort(options.temporalUiPort, '--temporal-ui-port'),
        s3Port: parsePort(options.s3Port, '--s3-port'),
        seaweedPorts: parsePortMap(
          options.seaweedPorts,
          '--seaweed-ports',
          SEAWEED_PORT_NAMES.filter((n) => n !== 's3'),
        ),
        metaPort: parsePort(options.metaPort, '--meta-port'),
        metaDatabase: options.metaDatabase,
        coordinatorPort: parsePort(options.coordinatorPort, '--coordinator-port'),
        postgresPort: parsePort(options.postgresPort, '--postgres-port'),
        controllerPort: parsePort(options.controllerPort, '--controller-port'),
        heavy: {
          maxReplicas: parseCount(options.heavyMax, '--heavy-max'),
          // The demo parks the pool soon after its query, unless told otherwise.
          idleTimeoutMs:
            options.demo && options.heavyIdleMs === HEAVY_IDLE_DEFAULT
              ? 15_000
              : parseCount(options.heavyIdleMs, '--heavy-idle-ms'),
          bootDelayMs: parseCount(options.heavyBootDelayMs, '--heavy-boot-delay-ms'),
        },
        // The demo's month of events is small: a window over all of it counts as heavy there.
        verdict: options.demo ? { memoryBytes: 1024 * 1024 } : undefined,
        bucket: options.bucket,
        log: say,
      });
      say(`ready; state in ${dataDir}, logs in ${path.join(dataDir, 'logs')}`);
      if (!options.json) console.log(JSON.stringify(cluster.endpoints, null, 2));
      if (options.demo) {
        try {
          const summary = await runDemo({
            endpoints: cluster.endpoints,
            token: (await readFile(tokenFile(dataDir), 'utf8')).trim(),
            rows: parseCount(options.demoRows, '--demo-rows'),
            waitForPark: Boolean(options.exit),
            say,
          });
          if (options.json) console.log(JSON.stringify(summary, null, 2));
        } catch (error) {
          await cluster.stop();
          throw error;
        }
        if (options.exit) {
          await cluster.stop();
          say('stopped');
          return;
        }
      }
      say(
        `Ctrl-C stops everything; the console is at ${cluster.endpoints.console} (log in with the token in ${tokenFile(dataDir)}), the Temporal Web UI at ${cluster.endpoints.temporalUi}`,
      );
      const gaveUp = await Promise.race([
        new Promise<undefined>((resolve) => {
          for (const signal of ['SIGINT', 'SIGTERM', 'SIGHUP'] as const) process.once(signal, () => resolve(undefined));
        }),
        cluster.failed.catch((error: Error) => error),
      ]);
      if (gaveUp) say(`${gaveUp.message}: stopping everything`);
      else say('stopping');
      await cluster.stop();
      say('stopped');
      if (gaveUp) process.exitCode = 1;
    });
}

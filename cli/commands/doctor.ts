/**
 * `berth doctor [--repair]`: finds tables an earlier Berth typed with what no Parquet segment
 * holds (HUGEINT, UHUGEINT: DuckDB wrote them as DOUBLE), checks their segments' footers and says
 * what it found; with --repair it sets meta's types to what the segments hold
 * (activities/legacy-types.ts says why the segments are not rewritten). Without --repair it
 * changes nothing, because a worker already mends these tables at its start: the doctor is for
 * looking first. Exits 1 while a finding is left unrepaired.
 */
import { mkdtemp, rm } from 'node:fs/promises';
import os from 'node:os';
import path from 'node:path';
import { Command } from 'commander';
import { checkLegacyTypes, type LegacyTypeFinding } from '../../activities/legacy-types.js';
import { openSandboxedDuckDB } from '../../services/common/duckdb.js';
import { createS3Client, s3ConfigFromEnv, type S3Config } from '../../services/common/s3-client.js';
import { MetaClient } from '../../services/meta/client.js';
import { dataDirOption, openCluster } from '../cluster-client.js';
import { s3IdentitiesFile } from '../embedded/cluster.js';
import { readS3Credentials } from '../embedded/s3-server.js';
import { UsageError } from '../usage-error.js';

interface Target {
  meta: MetaClient;
  s3: S3Config;
  bucket: string;
}

/** The cluster of a data dir, or the deployment BERTH_META_URL (with BERTH_TOKEN and the BERTH_S3_* settings) names. */
async function target(dataDir: string): Promise<Target> {
  const env = process.env;
  if (env.BERTH_META_URL) {
    if (!env.BERTH_TOKEN) throw new UsageError('BERTH_META_URL is set: set BERTH_TOKEN too');
    return {
      meta: new MetaClient(env.BERTH_META_URL, env.BERTH_TOKEN),
      s3: s3ConfigFromEnv(env),
      bucket: env.BERTH_S3_BUCKET || 'berth',
    };
  }
  const { endpoints, token } = await openCluster(dataDir);
  const credentials = await readS3Credentials(s3IdentitiesFile(path.resolve(dataDir))).catch((error: Error) => {
    throw new UsageError(`cannot read the cluster's S3 credentials: ${error.message}`);
  });
  return {
    meta: new MetaClient(endpoints.meta, token),
    s3: { endpoint: endpoints.s3, credentials },
    bucket: endpoints.bucket,
  };
}

export function formatFindings(findings: LegacyTypeFinding[]): string {
  if (findings.length === 0) return 'no table has a type its segments cannot hold';
  return findings.map((f) => f.message).join('\n');
}

export function doctorCommand(): Command {
  return new Command('doctor')
    .description(
      'find tables an earlier Berth typed HUGEINT or UHUGEINT (which its segments hold as DOUBLE), check ' +
        'their segments, and say what it found; --repair sets their types to DOUBLE (without it, nothing ' +
        'changes: a worker also repairs them at its start); exits 1 while a finding is left unrepaired. ' +
        'With BERTH_META_URL set it checks that deployment (BERTH_TOKEN, BERTH_S3_*) instead of a data dir',
    )
    .option('--repair', 'set each such column to the type its segments hold (DOUBLE)')
    .option('--json', 'print the findings as JSON')
    .addOption(dataDirOption())
    .action(async (options: { repair?: boolean; json?: boolean; dataDir: string }) => {
      const { meta, s3: s3Config, bucket } = await target(options.dataDir);
      const workDir = await mkdtemp(path.join(os.tmpdir(), 'berth-doctor-'));
      const s3 = createS3Client(s3Config);
      const duckdb = await openSandboxedDuckDB({ allowedDirectories: [workDir], tempDirectory: workDir, threads: 1 });
      try {
        const findings = await checkLegacyTypes({ s3, bucket, meta, duckdb, workDir }, { repair: !!options.repair });
        console.log(options.json ? JSON.stringify({ findings }) : formatFindings(findings));
        if (findings.some((f) => f.outcome !== 'repaired')) process.exitCode = 1;
      } finally {
        duckdb.closeSync();
        s3.destroy();
        await rm(workDir, { recursive: true, force: true });
      }
    });
}

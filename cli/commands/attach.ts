/**
 * `berth attach --table T s3://BUCKET/PREFIX/ …`: registers Parquet objects that already lie in a
 * bucket as segments of a table, without copying them. Each argument is a prefix (ending in `/`),
 * one object, or a glob over the bucket's keys; credentials for another endpoint come from a
 * profile of the cluster's BERTH_S3_PROFILES_FILE (`--profile`), never from the command line.
 */
import { Command } from 'commander';
import type { AttachRequest, AttachResult } from '../../services/coordinator/api.js';
import { ask, dataDirOption, openCluster } from '../cluster-client.js';
import { count } from '../format.js';
import { UsageError } from '../usage-error.js';

/** What an `s3://` argument names: a prefix, a glob or one key, in one bucket. */
export function parseS3Url(url: string): Pick<AttachRequest, 'bucket' | 'prefix' | 'glob' | 'keys'> {
  const match = /^s3:\/\/([^/]+)\/?(.*)$/.exec(url);
  if (!match) throw new UsageError(`"${url}" is not an s3://BUCKET/KEY URL`);
  const [, bucket, path] = match as unknown as [string, string, string];
  if (/[*?[{]/.test(path)) return { bucket, glob: path };
  if (path === '' || path.endsWith('/')) return { bucket, prefix: path };
  return { bucket, keys: [path] };
}

export function attachCommand(): Command {
  return new Command('attach')
    .description('attach Parquet objects already in a bucket as segments of a table, without copying them')
    .argument('<urls...>', 's3://BUCKET/PREFIX/ (every .parquet under it), s3://BUCKET/KEY, or s3://BUCKET/GLOB')
    .requiredOption('--table <name>', 'the table to attach them to (the first object creates it)')
    .option(
      '--profile <name>',
      'the S3 profile (BERTH_S3_PROFILES_FILE) whose endpoint and credentials read the bucket',
    )
    .option('--timestamp-column <name>', 'the timestamp column of a new table (default: ts)')
    .option('--no-timestamp', 'a new table without a timestamp column')
    .option(
      '--adopt',
      'let merges rewrite the objects into Berth’s own bucket (the objects themselves are never deleted)',
    )
    .option('--json', 'print each call’s outcome as JSON')
    .addOption(dataDirOption())
    .action(
      async (
        urls: string[],
        options: {
          table: string;
          profile?: string;
          timestampColumn?: string;
          timestamp: boolean;
          adopt?: boolean;
          json?: boolean;
          dataDir: string;
        },
      ) => {
        if (!options.timestamp && options.timestampColumn !== undefined)
          throw new UsageError('--timestamp-column and --no-timestamp: give one or the other');
        const timestamp = options.timestamp ? { timestampColumn: options.timestampColumn } : { noTimestamp: true };
        const targets = urls.map(parseS3Url);
        const { coordinator } = await openCluster(options.dataDir);
        const total: Omit<AttachResult, 'next'> = { attached: 0, unchanged: 0, replaced: 0, rows: 0, refused: [] };
        for (const target of targets) {
          let startAfter: string | undefined;
          do {
            const request: AttachRequest = {
              ...target,
              ...(options.profile ? { profile: options.profile } : {}),
              ...(options.adopt ? { adopt: true } : {}),
              ...(startAfter ? { startAfter } : {}),
            };
            const page = await ask(coordinator, (c) => c.attach(options.table, request, timestamp));
            if (options.json) console.log(JSON.stringify(page));
            total.attached += page.attached;
            total.unchanged += page.unchanged;
            total.replaced += page.replaced;
            total.rows += page.rows;
            total.refused.push(...page.refused);
            startAfter = page.next;
          } while (startAfter);
        }
        if (!options.json) {
          console.log(
            `${options.table}: ${count(total.attached)} objects attached, ${count(total.replaced)} replaced (changed since), ${count(total.unchanged)} unchanged, ${count(total.refused.length)} refused; ${count(total.rows)} rows`,
          );
          for (const { key, reason } of total.refused) console.log(`  refused ${key}: ${reason}`);
        }
        if (total.refused.length > 0) process.exitCode = 1;
      },
    );
}

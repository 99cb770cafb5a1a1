/** `berth ingest FILE --table T`: sends an NDJSON file to the cluster in batches, one segment each. */
import { createReadStream } from 'node:fs';
import { stat } from 'node:fs/promises';
import { SingleBar } from 'cli-progress';
import { Command, Option } from 'commander';
import { ndjsonLines } from '../../services/common/ndjson-lines.js';
import type { IngestResult } from '../../services/coordinator/client.js';
import { ask, dataDirOption, openCluster, type ClusterHandle } from '../cluster-client.js';
import { count } from '../format.js';
import { UsageError } from '../usage-error.js';

export function ingestCommand(): Command {
  return new Command('ingest')
    .description('ingest newline-delimited JSON rows into a table, in batches')
    .argument('<file>', 'an NDJSON file, one row per line')
    .requiredOption('--table <name>', 'the table to add the rows to')
    .addOption(new Option('--batch-rows <n>', 'rows per batch (each batch becomes one segment)').default('100000'))
    .option('--timestamp-column <name>', 'the timestamp column of a new table (default: ts)')
    .option('--no-timestamp', 'a new table without a timestamp column (a dimension table: never pruned by time)')
    .addOption(dataDirOption())
    .action(
      async (
        file: string,
        options: { table: string; batchRows: string; timestampColumn?: string; timestamp: boolean; dataDir: string },
      ) => {
        if (!options.timestamp && options.timestampColumn !== undefined)
          throw new UsageError('--timestamp-column and --no-timestamp: give one or the other');
        const timestamp = options.timestamp ? { timestampColumn: options.timestampColumn } : { noTimestamp: true };
        const batchRows = Number(options.batchRows);
        if (!Number.isInteger(batchRows) || batchRows < 1)
          throw new UsageError(`--batch-rows: "${options.batchRows}" must be a positive whole number`);
        const size = await stat(file)
          .then((s) => s.size)
          .catch(() => {
            throw new UsageError(`cannot read ${file}`);
          });
        const cluster = await openCluster(options.dataDir);
        const bar = process.stderr.isTTY
          ? new SingleBar({ format: 'ingest [{bar}] {percentage}% · {rows} rows · {segments} segments' })
          : undefined;
        bar?.start(size, 0, { rows: 0, segments: 0 });
        let rows = 0;
        let segments = 0;
        let sent = 0;
        let batch: string[] = [];
        const flush = async () => {
          if (batch.length === 0) return;
          const body = `${batch.join('\n')}\n`;
          await send(cluster, options.table, body, timestamp);
          rows += batch.length;
          segments++;
          sent += Buffer.byteLength(body);
          batch = [];
          bar?.update(Math.min(sent, size), { rows: count(rows), segments });
        };
        for await (const line of ndjsonLines(createReadStream(file))) {
          if (line.trim() === '') continue;
          batch.push(line);
          if (batch.length >= batchRows) await flush();
        }
        await flush();
        bar?.stop();
        console.log(`ingested ${count(rows)} rows into ${options.table} as ${segments} segment(s)`);
      },
    );
}

async function send(
  cluster: ClusterHandle,
  table: string,
  body: string,
  timestamp: { timestampColumn?: string; noTimestamp?: boolean },
): Promise<IngestResult> {
  return await ask(cluster.coordinator, (c) => c.ingest(table, body, timestamp));
}

/** `berth table list|show|set|drop`: the tables, their columns and segments, and their settings, through the coordinator. */
import { Client, Connection } from '@temporalio/client';
import { Command } from 'commander';
import { formatBytes } from '../../core/bytes.js';
import type { TableDetails } from '../../services/coordinator/api.js';
import { MERGE_TASK_QUEUE } from '../../workflows/contracts/shared.js';
import { startTableDrop } from '../../workflows/table-drop-client.js';
import { ask, dataDirOption, openCluster } from '../cluster-client.js';
import { count, table as grid } from '../format.js';
import { UsageError } from '../usage-error.js';

const UNIT_MS = { d: 86_400_000, h: 3_600_000, m: 60_000 } as const;

/** "30d", "12h" or "90m" in ms; "off" (or "none") for rows kept for good. */
export function parseRetention(text: string): number | null {
  if (text === 'off' || text === 'none') return null;
  const match = /^([1-9]\d*)([dhm])$/.exec(text);
  if (!match) throw new UsageError(`--retention: "${text}" is not a period such as 30d, 12h or 90m, nor "off"`);
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

/** A period in the largest unit that divides it: 30d, 36h, 90m. */
function period(ms: number | null): string {
  if (ms === null) return 'kept for good';
  const unit = (Object.keys(UNIT_MS) as (keyof typeof UNIT_MS)[]).find((u) => ms % UNIT_MS[u] === 0);
  return unit ? `${ms / UNIT_MS[unit]}${unit}` : `${ms} ms`;
}

const instant = (ms: number | null) => (ms === null ? '-' : new Date(ms).toISOString());

export function tableCommand(): Command {
  const table = new Command('table').description('the tables: their columns, segments and retention');

  table
    .command('list')
    .description('every table: segments, rows, bytes, retention, oldest and newest rows')
    .option('--json', 'print the tables as JSON')
    .addOption(dataDirOption())
    .action(async (options: { json?: boolean; dataDir: string }) => {
      const { coordinator } = await openCluster(options.dataDir);
      const names = (await ask(coordinator, (c) => c.tables())).map((t) => t.name);
      const details: TableDetails[] = [];
      for (const name of names) details.push(await ask(coordinator, (c) => c.table(name)));
      if (options.json) return console.log(JSON.stringify(details));
      if (details.length === 0) return console.log('no tables yet: `berth ingest` creates one');
      console.log(
        grid([
          ['table', 'columns', 'segments', 'rows', 'bytes', 'retention', 'oldest', 'newest'],
          ...details.map((t) => [
            t.name,
            String(t.columns.length),
            count(t.segments),
            count(t.rows),
            count(t.bytes),
            period(t.retentionMs),
            instant(t.oldest),
            instant(t.newest),
          ]),
        ]),
      );
    });

  table
    .command('show')
    .description("a table's schema version, columns, retention and segments")
    .argument('<table>', 'the table')
    .option('--json', 'print the table as JSON')
    .addOption(dataDirOption())
    .action(async (name: string, options: { json?: boolean; dataDir: string }) => {
      const t = await ask((await openCluster(options.dataDir)).coordinator, (c) => c.table(name));
      if (options.json) return console.log(JSON.stringify(t));
      console.log(
        [
          `${t.name}: schema ${t.schema}, ${t.timestampColumn === null ? 'no timestamp column' : `timestamps in "${t.timestampColumn}"`}, retention ${period(t.retentionMs)}`,
          `  ${count(t.segments)} segments, ${count(t.rows)} rows, ${count(t.bytes)} bytes; rows from ${instant(t.oldest)} to ${instant(t.newest)}`,
          grid([['column', 'type'], ...t.columns.map((c) => [c.name, c.type])]),
        ].join('\n'),
      );
    });

  table
    .command('set')
    .description("set a table's retention: segments whose newest row is older are retired, then deleted")
    .argument('<table>', 'the table')
    .requiredOption('--retention <period>', 'how long rows are kept: 30d, 12h, 90m, or "off" to keep them for good')
    .addOption(dataDirOption())
    .action(async (name: string, options: { retention: string; dataDir: string }) => {
      const retentionMs = parseRetention(options.retention);
      await ask((await openCluster(options.dataDir)).coordinator, (c) => c.setRetention(name, retentionMs));
      console.log(
        retentionMs === null
          ? `${name}: rows kept for good`
          : `${name}: rows kept ${options.retention}; older segments are retired on retention's next run`,
      );
    });

  table
    .command('drop')
    .description('drop a table: gone from queries at once, then its segments retired and their objects deleted')
    .argument('<table>', 'the table')
    .option('--yes', 'confirm: the rows cannot be brought back')
    .addOption(dataDirOption())
    .action(async (name: string, options: { yes?: boolean; dataDir: string }) => {
      if (!options.yes) throw new UsageError(`dropping ${name} deletes all of its rows for good: confirm with --yes`);
      const { coordinator, endpoints } = await openCluster(options.dataDir);
      const dropped = await ask(coordinator, (c) => c.dropTable(name));
      console.log(`${name}: dropped; retiring ${count(dropped.segments)} segments (${count(dropped.rows)} rows)`);
      // A worker's next sync would start it too: starting it here just does not wait for that.
      const connection = await Connection.connect({ address: endpoints.temporal });
      try {
        const client = new Client({ connection, namespace: endpoints.temporalNamespace });
        const run = await startTableDrop(client, { table: name, incarnation: dropped.incarnation }, MERGE_TASK_QUEUE);
        console.error(`${endpoints.temporalUi}/namespaces/${endpoints.temporalNamespace}/workflows/${run.workflowId}`);
        const retired = await run.result();
        console.log(
          `${name}: ${count(retired.segments)} segments (${formatBytes(retired.bytes)}) retired; ` +
            'the janitor deletes their objects after its grace time, and the name can be used again now',
        );
      } finally {
        await connection.close();
      }
    });

  return table;
}

/** `berth table set T --retention 30d`: a table's settings, through the coordinator. */
import { Command } from 'commander';
import { ask, dataDirOption, openCluster } from '../cluster-client.js';
import { UsageError } from '../usage-error.js';

const UNIT_MS = { d: 86_400_000, h: 3_600_000, m: 60_000 } as const;

/** "30d", "12h" or "90m" in ms; "off" (or "none") for rows kept for good. */
export function parseRetention(text: string): number | null {
  if (text === 'off' || text === 'none') return null;
  const match = /^([1-9]\d*)([dhm])$/.exec(text);
  if (!match) throw new UsageError(`--retention: "${text}" is not a period such as 30d, 12h or 90m, nor "off"`);
  return Number(match[1]) * UNIT_MS[match[2] as keyof typeof UNIT_MS];
}

export function tableCommand(): Command {
  const table = new Command('table').description("change a table's settings");

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

  return table;
}

/**
 * `berth cost`: the heavy pool's bill. Node-hours come from the pool's own ledger (whole UTC days:
 * `--since 30d` is today and the 29 days before it), priced per node-hour and set against a
 * resident pool of the same peak size for every hour of the window; compute concentration comes
 * from the coordinator's query log, with the scan threshold that would send each top share to the
 * pool.
 */
import { Command } from 'commander';
import type { Concentration, Placement } from '../../core/compute-concentration.js';
import {
  DEFAULT_PRICE_PER_NODE_HOUR,
  poolBill,
  windowStart,
  type Bill,
  type UsageWindow,
} from '../../core/node-hours.js';
import { formatBytes } from '../../core/bytes.js';
import { ask, dataDirOption, openCluster } from '../cluster-client.js';
import { count, percent, table } from '../format.js';
import { UsageError } from '../usage-error.js';

export { DEFAULT_PRICE_PER_NODE_HOUR };

export interface CostReport {
  group: string;
  window: UsageWindow & { days: number };
  bill: Bill;
  concentration: Concentration & { capacity: number; from?: number };
}

function parseDays(text: string): number {
  const match = /^(\d+)d$/.exec(text);
  const days = match ? Number(match[1]) : NaN;
  if (!Number.isInteger(days) || days < 1 || days > 400)
    throw new UsageError(`--since: "${text}" must be whole days, 1d to 400d (the ledger keeps 400)`);
  return days;
}

function parsePositive(text: string, flag: string, integer = false): number {
  const n = Number(text);
  if (!Number.isFinite(n) || n < 0 || (integer && !Number.isInteger(n)))
    throw new UsageError(`${flag}: "${text}" must be a ${integer ? 'whole ' : ''}number, at least 0`);
  return n;
}

const dollars = (n: number, digits = 2) =>
  `$${n.toLocaleString('en-US', { minimumFractionDigits: 2, maximumFractionDigits: digits })}`;

export function formatCost(report: CostReport): string {
  const { window: w, bill: b, concentration: c } = report;
  const lines = [
    `${report.group} pool, ${w.fromDay} 00:00 → ${new Date(w.to).toISOString().slice(0, 16).replace('T', ' ')} UTC (${w.days} day${w.days === 1 ? '' : 's'}, ${w.hours.toFixed(1)} h)`,
    table([
      ['', 'amount', ''],
      ['node-hours', w.nodeHours.toFixed(2), `peak ${w.peak} node${w.peak === 1 ? '' : 's'}`],
      ['price per node-hour', dollars(b.pricePerNodeHour, 6), ''],
      ['elastic pool', dollars(b.poolCost), `${w.nodeHours.toFixed(2)} h × ${dollars(b.pricePerNodeHour, 6)}`],
      [
        `resident ${b.residentNodes} node${b.residentNodes === 1 ? '' : 's'}`,
        dollars(b.residentCost),
        `${b.residentNodes} × ${w.hours.toFixed(1)} h × ${dollars(b.pricePerNodeHour, 6)}`,
      ],
      ['saving', dollars(b.saving), percent(b.savingFraction)],
    ]),
    '',
    c.queries === 0
      ? 'compute concentration: the coordinator has logged no queries in the window'
      : `compute concentration over the last ${count(c.queries)} queries this coordinator answered (it keeps ${count(c.capacity)}); the pool takes ${count(c.heavyNow.queries)} now (${percent(c.heavyNow.bytesShare)} of bytes, ${percent(c.heavyNow.timeShare)} of time)`,
    ...(c.queries === 0
      ? []
      : [
          table([
            ['top', 'queries', 'bytes', 'time', 'BERTH_HEAVY_SCAN_BYTES', 'sends', 'their time'],
            ...c.tops.map((t) => [
              percent(t.top, 0),
              count(t.queries),
              percent(t.bytesShare),
              percent(t.timeShare),
              `${formatBytes(t.scanThreshold)} (${t.scanThreshold})`,
              count(t.sent),
              percent(t.sentTimeShare),
            ]),
          ]),
          '',
          'where they ran',
          table([
            ['group', 'bottleneck', 'queries', 'time', 'final stages'],
            ...(c.placements ?? []).map((p) => [
              p.group,
              p.bottleneck ?? '',
              count(p.queries),
              percent(p.timeShare),
              finalStages(p.finalStages),
            ]),
          ]),
        ]),
  ];
  return lines.join('\n');
}

/** The hosts that ran a placement's final stages, the busiest first: three named, the rest counted. */
function finalStages(hosts: Placement['finalStages']): string {
  const named = hosts.slice(0, 3).map((h) => `${h.host} (${count(h.queries)})`);
  const rest = hosts.length - named.length;
  return [...named, ...(rest > 0 ? [`${rest} more`] : [])].join(', ');
}

export function costCommand(): Command {
  return new Command('cost')
    .description(
      'the heavy pool’s node-hours and what they cost against a resident pool; compute concentration from the query log',
    )
    .argument('[group]', 'the pool’s compute group', 'heavy')
    .option('--since <days>', 'whole UTC days up to now, today included, e.g. 30d', '30d')
    .option(
      '--price-per-node-hour <dollars>',
      `a node-hour's price (default: ${DEFAULT_PRICE_PER_NODE_HOUR}, the seed's on-demand node)`,
    )
    .option(
      '--resident-nodes <n>',
      'the resident pool to compare with (default: the peak the pool reached in the window)',
    )
    .option('--json', 'print the report as JSON')
    .addOption(dataDirOption())
    .action(
      async (
        group: string,
        options: { since: string; pricePerNodeHour?: string; residentNodes?: string; json?: boolean; dataDir: string },
      ) => {
        const days = parseDays(options.since);
        const price =
          options.pricePerNodeHour === undefined
            ? DEFAULT_PRICE_PER_NODE_HOUR
            : parsePositive(options.pricePerNodeHour, '--price-per-node-hour');
        const resident =
          options.residentNodes === undefined
            ? undefined
            : parsePositive(options.residentNodes, '--resident-nodes', true);
        const cluster = await openCluster(options.dataDir);
        const usage = await ask(cluster.controller, (c) => c.poolUsage(group));
        const now = Date.now();
        const concentration = await ask(cluster.coordinator, (c) =>
          c.concentration(Date.parse(`${windowStart(now, days)}T00:00:00Z`)),
        );
        const report: CostReport = { group, ...poolBill(usage, now, days, price, resident), concentration };
        console.log(options.json ? JSON.stringify(report) : formatCost(report));
      },
    );
}

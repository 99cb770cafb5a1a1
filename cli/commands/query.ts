/** `berth query "SQL"`: runs SQL on the cluster and shows the rows and how they were served. */
import { once } from 'node:events';
import type { Readable } from 'node:stream';
import { Command } from 'commander';
import { ndjsonLines } from '../../services/common/ndjson-lines.js';
import { ask, dataDirOption, openCluster } from '../cluster-client.js';
import { count, table } from '../format.js';
import { UsageError } from '../usage-error.js';

export function queryCommand(): Command {
  return new Command('query')
    .description('run a SQL query on the cluster')
    .argument('<sql>', 'one SELECT statement')
    .option('--json', 'print one JSON object: { columns, rows, stats }')
    .option(
      '--ndjson',
      'stream the answer as it is made, of any size: a line of columns, a line per row, a line of stats',
    )
    .addOption(dataDirOption())
    .action(async (sql: string, options: { json?: boolean; ndjson?: boolean; dataDir: string }) => {
      const cluster = await openCluster(options.dataDir);
      if (options.ndjson) return await streamAnswer(await ask(cluster.coordinator, (c) => c.queryNdjson(sql)));
      const result = await ask(cluster.coordinator, (c) => c.query(sql));
      if (options.json) {
        console.log(JSON.stringify({ columns: result.columns, rows: result.rows, stats: result.stats }));
        return;
      }
      const cell = (v: unknown) => (v === null ? 'NULL' : typeof v === 'object' ? JSON.stringify(v) : String(v));
      console.log(table([result.columns, ...result.rows.map((row) => row.map(cell))], ''));
      const s = result.stats;
      const nodes =
        Object.entries(s.nodes)
          .map(([id, n]) => `${id}: ${n}`)
          .join(', ') || 'none';
      console.log(
        `\n${count(result.rows.length)} row(s) in ${s.elapsedMs} ms (plan ${s.timings.planMs}, queued ${s.timings.queuedMs}, scan ${s.timings.scanMs}, final ${s.timings.finalMs}) · route ${s.route}${s.reason ? ` (${s.reason})` : ''} · ` +
          `segments ${s.segments.scanned} of ${s.segments.total} (${s.segments.pruned} pruned) · nodes ${nodes} · ` +
          `cache ${s.cacheHits} hit(s), ${s.cacheMisses} miss(es), ${s.s3Gets} S3 GET(s)${s.fallbacks ? ` · ${s.fallbacks} fallback(s)` : ''}`,
      );
    });
}

/** Copies the lines to stdout as they come; a last line that is an error fails the command with its message. */
async function streamAnswer(lines: Readable): Promise<void> {
  let last = '';
  for await (const line of ndjsonLines(lines)) {
    if (!process.stdout.write(`${line}\n`)) await once(process.stdout, 'drain');
    last = line;
  }
  let end: { stats?: unknown; message?: string } = {};
  try {
    end = JSON.parse(last) as typeof end;
  } catch {
    // cut off mid-line: the connection ended early
  }
  if (!end.stats) throw new UsageError(`the query failed part way: ${end.message ?? 'the answer ended early'}`);
}

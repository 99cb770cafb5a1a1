/** `berth query "SQL"`: runs SQL on the cluster and shows the rows and how they were served. */
import { Command } from 'commander';
import { ask, dataDirOption, openCluster } from '../cluster-client.js';
import { count, table } from '../format.js';

export function queryCommand(): Command {
  return new Command('query')
    .description('run a SQL query on the cluster')
    .argument('<sql>', 'one SELECT statement')
    .option('--json', 'print one JSON object: { columns, rows, stats }')
    .addOption(dataDirOption())
    .action(async (sql: string, options: { json?: boolean; dataDir: string }) => {
      const cluster = await openCluster(options.dataDir);
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
        `\n${count(result.rows.length)} row(s) in ${s.elapsedMs} ms · route ${s.route}${s.reason ? ` (${s.reason})` : ''} · ` +
          `segments ${s.segments.scanned} of ${s.segments.total} (${s.segments.pruned} pruned) · nodes ${nodes} · ` +
          `cache ${s.cacheHits} hit(s), ${s.cacheMisses} miss(es), ${s.s3Gets} S3 GET(s)${s.fallbacks ? ` · ${s.fallbacks} fallback(s)` : ''}`,
      );
    });
}

/**
 * `berth nodes`: the cluster's query nodes with weight, share of segments and liveness, and cache
 * warm-up: the warm fraction of the bytes each node owns, and after a membership change the
 * warm-up progress of the share that moved to it.
 */
import { Command } from 'commander';
import { formatBytes } from '../../core/bytes.js';
import { ask, dataDirOption, openCluster } from '../cluster-client.js';
import { percent, table } from '../format.js';

export function nodesCommand(): Command {
  return new Command('nodes')
    .description('list the query nodes with weight, share and liveness')
    .option('--json', 'print the list as JSON')
    .addOption(dataDirOption())
    .action(async (options: { json?: boolean; dataDir: string }) => {
      const nodes = await ask((await openCluster(options.dataDir)).coordinator, (c) => c.nodes());
      if (options.json) {
        console.log(JSON.stringify(nodes));
        return;
      }
      console.log(
        table(
          [
            ['node', 'group', 'url', 'vCPU', 'share', 'alive', 'warm', 'moved here, warm', 'last heartbeat'],
            ...nodes.map((n) => [
              n.id,
              n.group,
              n.url,
              String(n.weight),
              percent(n.share),
              n.alive ? 'yes' : 'NO',
              n.warmth?.owned ? `${percent(n.warmth.owned.fraction)} of ${formatBytes(n.warmth.owned.bytes)}` : '-',
              n.warmth?.moved
                ? `${percent(n.warmth.moved.fraction)} of ${formatBytes(n.warmth.moved.bytes)} since ${n.warmth.moved.since.slice(11, 19)}`
                : '-',
              n.lastHeartbeat,
            ]),
          ],
          '',
        ),
      );
    });
}

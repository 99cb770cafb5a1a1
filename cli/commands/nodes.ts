/** `berth nodes`: the cluster's query nodes with weight, share of segments and liveness. */
import { Command } from 'commander';
import { callCoordinator, dataDirOption, openCluster } from '../cluster-client.js';
import { percent, table } from '../format.js';

interface NodeRow {
  id: string;
  group: string;
  url: string;
  weight: number;
  share: number;
  alive: boolean;
  lastHeartbeat: string;
}

export function nodesCommand(): Command {
  return new Command('nodes')
    .description('list the query nodes with weight, share and liveness')
    .option('--json', 'print the list as JSON')
    .addOption(dataDirOption())
    .action(async (options: { json?: boolean; dataDir: string }) => {
      const { nodes } = await callCoordinator<{ nodes: NodeRow[] }>(await openCluster(options.dataDir), '/v1/nodes');
      if (options.json) {
        console.log(JSON.stringify(nodes));
        return;
      }
      console.log(
        table(
          [['node', 'group', 'url', 'vCPU', 'share', 'alive', 'last heartbeat'], ...nodes.map((n) => [n.id, n.group, n.url, String(n.weight), percent(n.share), n.alive ? 'yes' : 'NO', n.lastHeartbeat])],
          '',
        ),
      );
    });
}

/** `berth delete --table T --where "…"`: removes the rows a condition holds true for, and waits. */
import { Client, Connection } from '@temporalio/client';
import { Command } from 'commander';
import { MERGE_TASK_QUEUE } from '../../workflows/contracts/shared.js';
import { startRowDelete } from '../../workflows/row-delete-client.js';
import { ask, dataDirOption, openCluster } from '../cluster-client.js';
import { count } from '../format.js';

export function deleteCommand(): Command {
  return new Command('delete')
    .description('delete the rows a condition holds true for (as after WHERE), rewriting the segments that hold them')
    .requiredOption('--table <name>', 'the table to delete from')
    .requiredOption('--where <condition>', 'the condition, on the table’s own columns: "user_id = 42"')
    .option('--json', 'print the workflow’s result as JSON')
    .addOption(dataDirOption())
    .action(async (options: { table: string; where: string; json?: boolean; dataDir: string }) => {
      const { coordinator, endpoints } = await openCluster(options.dataDir);
      const task = await ask(coordinator, (c) => c.requestDelete(options.table, options.where));
      // A worker's next sync would start it too: starting it here just does not wait for that.
      const connection = await Connection.connect({ address: endpoints.temporal });
      try {
        const client = new Client({ connection, namespace: endpoints.temporalNamespace });
        const run = await startRowDelete(client, task, MERGE_TASK_QUEUE);
        console.error(
          `deleting from ${options.table}: ${endpoints.temporalUi}/namespaces/${endpoints.temporalNamespace}/workflows/${run.workflowId}`,
        );
        const result = await run.result();
        if (options.json) return console.log(JSON.stringify(result));
        console.log(
          `${options.table}: ${count(result.rowsRemoved)} rows removed; ${result.segmentsRewritten} segments rewritten, ${result.segmentsRetired} retired whole`,
        );
        for (const s of result.perSegment) console.log(`  ${s.segment}: ${count(s.removed)} rows`);
      } finally {
        await connection.close();
      }
    });
}

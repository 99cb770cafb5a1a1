/** `berth merge --table T`: merges a table's small segments now, partition by partition, and waits. */
import { Client, Connection } from '@temporalio/client';
import { Command, Option } from 'commander';
import { MERGE_TASK_QUEUE } from '../../workflows/contracts/shared.js';
import type { TableMergeResult } from '../../workflows/contracts/segment-merge.js';
import type { tableMergeWorkflow } from '../../workflows/index.js';
import { dataDirOption, openCluster } from '../cluster-client.js';
import { UsageError } from '../usage-error.js';

export function mergeCommand(): Command {
  return new Command('merge')
    .description('merge a table’s small segments now (as its schedule would) and wait for the result')
    .requiredOption('--table <name>', 'the table to merge')
    .addOption(new Option('--min-inputs <n>', 'fewest level-0 segments of a partition worth a merge').default('2'))
    .option('--json', 'print the workflow’s result as JSON')
    .addOption(dataDirOption())
    .action(async (options: { table: string; minInputs: string; json?: boolean; dataDir: string }) => {
      const minInputs = Number(options.minInputs);
      if (!Number.isInteger(minInputs) || minInputs < 2)
        throw new UsageError(`--min-inputs: "${options.minInputs}" must be a whole number of at least 2`);
      const { endpoints } = await openCluster(options.dataDir);
      const connection = await Connection.connect({ address: endpoints.temporal });
      try {
        const client = new Client({ connection, namespace: endpoints.temporalNamespace });
        const workflowId = `merge-${options.table}-now-${Date.now()}`;
        console.error(
          `merging ${options.table}: ${endpoints.temporalUi}/namespaces/${endpoints.temporalNamespace}/workflows/${workflowId}`,
        );
        const result: TableMergeResult = await client.workflow.execute<typeof tableMergeWorkflow>(
          'tableMergeWorkflow',
          {
            taskQueue: MERGE_TASK_QUEUE,
            workflowId,
            args: [{ table: options.table, minInputs }],
          },
        );
        if (options.json) console.log(JSON.stringify(result));
        else if (result.partitions.length === 0)
          console.log(`${options.table}: no partition has ${minInputs} or more level-0 segments`);
        else for (const p of result.partitions) console.log(`${options.table}/${p.partition}: ${p.outcome}`);
      } finally {
        await connection.close();
      }
    });
}

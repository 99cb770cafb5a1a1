/** `berth serving status`: the serving group's autoscaler (opt-in), with each step's expected cost. */
import { Command } from 'commander';
import { formatBytes } from '../../core/bytes.js';
import type { ServingScalerStatus } from '../../workflows/contracts/serving-scaler.js';
import { ask, dataDirOption, openCluster } from '../cluster-client.js';
import { percent } from '../format.js';

export function formatServingScaler(s: ServingScalerStatus): string {
  return [
    `${s.group} autoscaler: ${s.replicas} replicas (floor ${s.floor}, max ${s.max}); running ${s.running}, waiting ${s.waiting} over ${s.coordinators} coordinator${s.coordinators === 1 ? '' : 's'}`,
    ...(s.pressedSince ? [`  waiting since ${new Date(s.pressedSince).toISOString()}`] : []),
    ...(s.idleSince ? [`  idle since ${new Date(s.idleSince).toISOString()}`] : []),
    ...(s.steps.length === 0 ? ['  no steps taken'] : ['  steps, each planned before it was taken:']),
    ...s.steps.map(
      (p) =>
        `    ${new Date(p.at).toISOString()}  ${p.from} → ${p.to} (${p.reason}): about ${percent(p.movedShare)} of segments (${formatBytes(p.movedBytes)}) change owner; expect the cache-hit rate ${percent(p.expectedHitRateDip)} lower until they are warm`,
    ),
  ].join('\n');
}

export function servingCommand(): Command {
  const serving = new Command('serving').description(
    'the serving group’s autoscaler (opt-in: BERTH_SERVING_AUTOSCALE=1)',
  );
  serving
    .command('status')
    .description('replicas, load, and the steps taken with what each was expected to move')
    .argument('[group]', 'the serving group', 'serving')
    .option('--json', 'print the status as JSON')
    .addOption(dataDirOption())
    .action(async (group: string, options: { json?: boolean; dataDir: string }) => {
      const status = await ask((await openCluster(options.dataDir)).controller, (c) => c.servingAutoscaler(group));
      console.log(options.json ? JSON.stringify(status) : formatServingScaler(status));
    });
  return serving;
}

/** `berth pool launch|status`: the heavy pool through its controller. */
import { Command } from 'commander';
import { ask, dataDirOption, openCluster } from '../cluster-client.js';

export function poolCommand(): Command {
  const pool = new Command('pool').description('launch and watch the elastic heavy pool');

  pool
    .command('launch')
    .description('raise a pool’s replica target (raise-only; rounded up to its increment, capped at its maximum)')
    .argument('<group>', 'the pool’s compute group')
    .requiredOption('--target <n>', 'replicas wanted')
    .option('--json', 'print the answer as JSON')
    .addOption(dataDirOption())
    .action(async (group: string, options: { target: string; json?: boolean; dataDir: string }) => {
      const target = Number(options.target);
      const accepted = await ask((await openCluster(options.dataDir)).controller, (c) => c.launch(group, target));
      console.log(
        options.json
          ? JSON.stringify(accepted)
          : `${group}: target ${accepted.accepted} accepted (workflow ${accepted.workflowId})`,
      );
    });

  pool
    .command('status')
    .description('a pool’s phase, target, pods, alive backends and serve-ready bit')
    .argument('<group>', 'the pool’s compute group')
    .option('--json', 'print the status as JSON')
    .addOption(dataDirOption())
    .action(async (group: string, options: { json?: boolean; dataDir: string }) => {
      const s = await ask((await openCluster(options.dataDir)).controller, (c) => c.poolStatus(group));
      if (options.json) {
        console.log(JSON.stringify(s));
        return;
      }
      console.log(
        [
          `${s.group}: ${s.phase}${s.phase === 'parked' ? ' at zero replicas (the floor, not a fault)' : ''}`,
          `  target ${s.target}, replicas patched ${s.replicasPatched} (${s.patches} patches), pods running ${s.podsRunning}, alive backends ${s.aliveBackends}`,
          `  serve-ready: ${s.serveReady ? 'yes' : 'no'}${s.notReady ? ` (${s.notReady})` : ''}; readiness layers passed: ${s.layersPassed.join(' → ') || 'none'}`,
          `  queries running ${s.running} of ${s.maxConcurrency}, waiting ${s.waiting} of ${s.maxQueueSize}${s.idleDeadline ? `; parks at ${new Date(s.idleDeadline).toISOString()} if idle` : ''}`,
          ...(s.platformSays ? [`  the platform says: ${s.platformSays}`] : []),
          ...(s.launchDeadline
            ? [`  the launch fails at ${new Date(s.launchDeadline).toISOString()} if not serve-ready by then`]
            : []),
          ...(s.lastFailure
            ? [`  last failure (${new Date(s.lastFailure.at).toISOString()}): ${s.lastFailure.message}`]
            : []),
          ...(s.nodeHours
            ? [`  node-hours: ${s.nodeHours.today.toFixed(2)} today, ${s.nodeHours.month.toFixed(2)} this month (UTC)`]
            : []),
          ...(s.links ? [`  preflight: berth preflight ${s.group} (GET ${s.links.preflight})`] : []),
        ].join('\n'),
      );
    });

  return pool;
}

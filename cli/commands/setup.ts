/**
 * `berth setup --temporal ADDRESS [--namespace NS]`: prepares a Temporal deployment for Berth by
 * registering its search attributes. Workers do the same when they start; this is for deployments
 * that want it done once, before anything else connects (docker-compose's one-shot service, a
 * Kubernetes Job). It waits for Temporal to answer, so it can start alongside it.
 */
import { Connection } from '@temporalio/client';
import { Command, Option } from 'commander';
import { registerSearchAttributes } from '../../workers/search-attributes.js';
import { parseCount } from '../options.js';

interface SetupOptions {
  temporal: string;
  namespace: string;
  waitMs: string;
}

export function setupCommand(): Command {
  return new Command('setup')
    .description('prepare a Temporal namespace for Berth: register its search attributes (safe to run again)')
    .addOption(
      new Option('--temporal <address>', 'the Temporal frontend, host:port')
        .env('BERTH_TEMPORAL_ADDRESS')
        .makeOptionMandatory(),
    )
    .addOption(
      new Option('--namespace <name>', 'the Temporal namespace Berth uses')
        .default('default')
        .env('BERTH_TEMPORAL_NAMESPACE'),
    )
    .addOption(new Option('--wait-ms <ms>', 'how long to wait for Temporal to answer').default('120000'))
    .action(async (options: SetupOptions) => {
      const connection = await connectWhenUp(options.temporal, parseCount(options.waitMs, '--wait-ms'));
      try {
        const { added, present } = await registerSearchAttributes(connection, options.namespace);
        for (const name of added) console.log(`${options.namespace}: search attribute ${name} registered`);
        for (const name of present) console.log(`${options.namespace}: search attribute ${name} already there`);
      } finally {
        await connection.close();
      }
    });
}

async function connectWhenUp(address: string, waitMs: number): Promise<Connection> {
  const deadline = Date.now() + waitMs;
  for (;;) {
    try {
      return await Connection.connect({ address, connectTimeout: 5_000 });
    } catch (error) {
      if (Date.now() > deadline)
        throw new Error(`Temporal at ${address} did not answer within ${waitMs} ms`, { cause: error });
      await new Promise((resolve) => setTimeout(resolve, 1_000));
    }
  }
}

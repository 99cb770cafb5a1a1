/** How CLI commands find and call the cluster that `berth up` runs on a data dir. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Option } from 'commander';
import { ServiceCallError } from '../services/common/http-client.js';
import { ControllerClient } from '../services/controller/client.js';
import { CoordinatorClient } from '../services/coordinator/client.js';
import { endpointsFile, tokenFile, type Endpoints } from './embedded/cluster.js';
import { UsageError } from './usage-error.js';

export const dataDirOption = () =>
  new Option('--data-dir <dir>', 'the data dir of a running `berth up`').default('.berth').env('BERTH_DATA_DIR');

export interface ClusterHandle {
  endpoints: Endpoints;
  token: string;
  coordinator: CoordinatorClient;
  controller: ControllerClient;
}

export async function openCluster(dataDir: string): Promise<ClusterHandle> {
  const dir = path.resolve(dataDir);
  try {
    const endpoints = JSON.parse(await readFile(endpointsFile(dir), 'utf8')) as Endpoints;
    const token = (await readFile(tokenFile(dir), 'utf8')).trim();
    return {
      endpoints,
      token,
      coordinator: new CoordinatorClient(endpoints.coordinator, token),
      controller: new ControllerClient(endpoints.controller, token),
    };
  } catch {
    throw new UsageError(`no cluster found in ${dir}: start one with \`berth up --data-dir ${dataDir}\``);
  }
}

/** Runs `call` on the coordinator or the controller; their refusals and their silence become one-line usage errors. */
export async function ask<C extends CoordinatorClient | ControllerClient, T>(
  client: C,
  call: (client: C) => Promise<T>,
): Promise<T> {
  const service = client instanceof CoordinatorClient ? 'coordinator' : 'controller';
  try {
    return await call(client);
  } catch (error) {
    if (error instanceof ServiceCallError)
      throw new UsageError(error.body?.message ?? `the ${service} answered ${error.status}`);
    throw new UsageError(
      `the ${service} at ${client.url} does not answer: is \`berth up\` running? (${(error as Error).message})`,
    );
  }
}

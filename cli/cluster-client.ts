/** How CLI commands find and call the cluster that `berth up` runs on a data dir. */
import { readFile } from 'node:fs/promises';
import path from 'node:path';
import { Option } from 'commander';
import { bearer } from '../services/common/auth.js';
import { endpointsFile, tokenFile, type Endpoints } from './embedded/cluster.js';
import { UsageError } from './usage-error.js';

export const dataDirOption = () => new Option('--data-dir <dir>', 'the data dir of a running `berth up`').default('.berth').env('BERTH_DATA_DIR');

export interface ClusterHandle {
  endpoints: Endpoints;
  token: string;
}

export async function openCluster(dataDir: string): Promise<ClusterHandle> {
  const dir = path.resolve(dataDir);
  try {
    const endpoints = JSON.parse(await readFile(endpointsFile(dir), 'utf8')) as Endpoints;
    const token = (await readFile(tokenFile(dir), 'utf8')).trim();
    return { endpoints, token };
  } catch {
    throw new UsageError(`no cluster found in ${dir}: start one with \`berth up --data-dir ${dataDir}\``);
  }
}

/** Calls the coordinator; its 4xx messages become one-line usage errors. */
export async function callCoordinator<T>(cluster: ClusterHandle, route: string, init: RequestInit = {}): Promise<T> {
  let response: Response;
  try {
    response = await fetch(`${cluster.endpoints.coordinator}${route}`, init);
  } catch {
    throw new UsageError(`the coordinator at ${cluster.endpoints.coordinator} does not answer: is \`berth up\` running?`);
  }
  const body = (await response.json()) as T & { message?: string };
  if (!response.ok) throw new UsageError(body.message ?? `the coordinator answered ${response.status}`);
  return body;
}

/** Calls the controller with the cluster's token; its 4xx and 5xx messages become one-line usage errors. */
export async function callController<T>(dataDir: string, route: string, init: RequestInit = {}): Promise<T> {
  const { endpoints, token } = await openCluster(dataDir);
  let response: Response;
  try {
    response = await fetch(`${endpoints.controller}${route}`, { ...init, headers: { ...init.headers, ...bearer(token) } });
  } catch {
    throw new UsageError(`the controller at ${endpoints.controller} does not answer: is \`berth up\` running?`);
  }
  const body = (await response.json()) as T & { message?: string };
  if (!response.ok) throw new UsageError(body.message ?? `the controller answered ${response.status}`);
  return body;
}

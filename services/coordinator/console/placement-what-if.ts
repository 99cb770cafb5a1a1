/**
 * The Cluster view's what-if: what adding one node (ID:VCPU) or removing one would move, by the
 * same simulation `berth placement simulate` runs (core/placement-simulation.ts), starting from
 * the live members and their vCPU weights. Ownership is per segment id, so a sample of ids shows
 * the fraction that moves; the figures equal the CLI's for the same --nodes and --segments.
 */
import { Worker } from 'node:worker_threads';
import { simulatePlacement, type SimulationInput, type SimulationResult } from '../../../core/placement-simulation.js';
import type { WeightedNode } from '../../../core/ownership.js';
import { badRequest } from '../../common/errors.js';

/** Segment ids sampled: enough for a fraction to a tenth of a percent, fast at 1,000 nodes. */
export const WHAT_IF_SEGMENTS = 10_000;

export interface WhatIf {
  /** The --nodes, --add and --remove `berth placement simulate` would take for the same answer. */
  nodes: string;
  add?: string;
  remove?: string;
  result: SimulationResult;
}

/** The members after the change, or a 400 naming what is wrong with it. */
export function membersAfter(
  members: readonly WeightedNode[],
  change: { add?: string; remove?: string },
): WeightedNode[] {
  const known = new Set(members.map((m) => m.id));
  let after = [...members];
  if (change.remove !== undefined) {
    if (!known.has(change.remove)) throw badRequest('unknown_node', `no live member is called "${change.remove}"`);
    after = after.filter((m) => m.id !== change.remove);
  }
  if (change.add !== undefined) {
    const [, id, vcpu] = /^([^:,\s]+):(\d+)$/.exec(change.add) ?? [];
    if (!id || !(Number(vcpu) > 0)) throw badRequest('bad_node', `"${change.add}" is not ID:VCPU, e.g. node-4:4`);
    if (known.has(id)) throw badRequest('node_exists', `"${id}" is already a member`);
    after.push({ id, weight: Number(vcpu) });
  }
  return after;
}

const whatIf = (members: readonly WeightedNode[], change: { add?: string; remove?: string }) => ({
  nodes: members.map((m) => `${m.id}:${m.weight}`).join(','),
  ...change,
});

export function placementWhatIf(members: readonly WeightedNode[], change: { add?: string; remove?: string }): WhatIf {
  const after = membersAfter(members, change);
  return {
    ...whatIf(members, change),
    result: simulatePlacement({ before: members, after, segments: WHAT_IF_SEGMENTS }),
  };
}

/**
 * The same, simulated on a worker thread: at 1,000 nodes it is about half a second of CPU, which
 * the coordinator's event loop (serving every query) must not spend. Checked here first, so a bad
 * change is still a 400. Runs from the built code (dist), where the thread's module is JavaScript.
 */
export async function placementWhatIfOffThread(
  members: readonly WeightedNode[],
  change: { add?: string; remove?: string },
): Promise<WhatIf> {
  const input: SimulationInput = { before: members, after: membersAfter(members, change), segments: WHAT_IF_SEGMENTS };
  const thread = new Worker(new URL('./placement-what-if-thread.js', import.meta.url), { workerData: input });
  const result = await new Promise<SimulationResult>((resolve, reject) => {
    thread.once('message', resolve);
    thread.once('error', reject);
    thread.once('exit', (code) => reject(new Error(`the what-if's thread exited with ${code} before answering`)));
  });
  return { ...whatIf(members, change), result };
}

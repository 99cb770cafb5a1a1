/**
 * The Cluster view's what-if: what adding one node (ID:VCPU) or removing one would move, by the
 * same simulation `berth placement simulate` runs (core/placement-simulation.ts), starting from
 * the live members and their vCPU weights. Ownership is per segment id, so a sample of ids shows
 * the fraction that moves; the figures equal the CLI's for the same --nodes and --segments.
 */
import { simulatePlacement, type SimulationResult } from '../../../core/placement-simulation.js';
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

export function placementWhatIf(members: readonly WeightedNode[], change: { add?: string; remove?: string }): WhatIf {
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
  return {
    nodes: members.map((m) => `${m.id}:${m.weight}`).join(','),
    ...change,
    result: simulatePlacement({ before: members, after, segments: WHAT_IF_SEGMENTS }),
  };
}

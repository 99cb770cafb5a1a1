/** Parses `--nodes A:16,B:16,C:8` style lists for the placement commands. */
import { InvalidMemberListError, Placement, type WeightedNode } from '../core/ownership.js';
import { UsageError } from './usage-error.js';

/** "A:16,B:8" → nodes; every entry needs an id and a positive weight. */
export function parseNodeList(text: string, flag: string): WeightedNode[] {
  return text
    .split(',')
    .map((entry) => entry.trim())
    .filter(Boolean)
    .map((entry) => {
      const [id, weight, ...rest] = entry.split(':');
      if (!id || weight === undefined || weight === '' || rest.length > 0) {
        throw new UsageError(`${flag}: "${entry}" needs the form ID:WEIGHT, e.g. A:16`);
      }
      const value = Number(weight);
      if (!Number.isFinite(value) || value <= 0) {
        throw new UsageError(`${flag}: node "${id}" has weight "${weight}": a weight must be a positive number`);
      }
      return { id, weight: value };
    });
}

/** Builds a Placement, turning a bad member list into a usage error. */
export function placementOf(nodes: readonly WeightedNode[], flag: string): Placement {
  try {
    return new Placement(nodes);
  } catch (error) {
    if (error instanceof InvalidMemberListError) throw new UsageError(`${flag}: ${error.message}`);
    throw error;
  }
}

export interface MembershipChange {
  add?: string;
  remove?: string;
  set?: string;
}

/** The member list after removing, reweighting and adding nodes, checked against the list before. */
export function applyChange(before: readonly WeightedNode[], change: MembershipChange): WeightedNode[] {
  const known = new Set(before.map((n) => n.id));
  const removed = new Set(
    (change.remove ?? '')
      .split(',')
      .map((s) => s.trim())
      .filter(Boolean),
  );
  for (const id of removed) {
    if (!known.has(id)) throw new UsageError(`--remove: node "${id}" is not in --nodes`);
  }
  const reweighted = new Map(parseNodeList(change.set ?? '', '--set').map((n) => [n.id, n.weight]));
  for (const id of reweighted.keys()) {
    if (!known.has(id)) throw new UsageError(`--set: node "${id}" is not in --nodes`);
  }
  const added = parseNodeList(change.add ?? '', '--add');
  for (const node of added) {
    if (known.has(node.id)) throw new UsageError(`--add: node "${node.id}" is already in --nodes`);
  }
  return [
    ...before.filter((n) => !removed.has(n.id)).map((n) => ({ id: n.id, weight: reweighted.get(n.id) ?? n.weight })),
    ...added,
  ];
}

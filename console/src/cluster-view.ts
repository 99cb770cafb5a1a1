/**
 * Cluster: every query node as `berth nodes` lists it, with its share of the segments (its vCPU
 * weight over the live members': weighted ownership) and of the bytes it owns as bars.
 */
import { api } from './api.js';
import { bar, formatBytes, h, table } from './dom.js';
import type { NodeRow } from './types.js';

export async function clusterView(): Promise<HTMLElement> {
  const { nodes } = await api<{ nodes: NodeRow[] }>('/nodes');
  const ownedBytes = nodes.reduce((sum, n) => sum + (n.warmth?.owned?.bytes ?? 0), 0);
  return h(
    'section',
    { 'aria-labelledby': 'cluster-title', 'data-refresh-ms': '5000' },
    h('h2', { id: 'cluster-title' }, 'Cluster'),
    h('p', {}, `${nodes.length} query nodes, ${nodes.filter((n) => n.alive).length} alive.`),
    table(
      'Query nodes',
      ['node', 'group', 'vCPU', 'share of segments', 'share of bytes', 'alive', 'warm', 'last heartbeat'],
      nodes.map((n) => {
        const owned = n.warmth?.owned;
        return [
          h('span', { 'data-testid': 'node-id' }, n.id),
          n.group,
          h('span', { 'data-testid': 'node-weight' }, n.weight),
          bar(n.share, `${n.id} share of segments`, 'node-share'),
          owned && ownedBytes > 0
            ? bar(owned.bytes / ownedBytes, `${n.id} share of bytes`, 'node-bytes-share')
            : h('span', {}, '-'),
          h('span', { class: n.alive ? 'ok' : 'bad' }, n.alive ? 'alive' : 'NOT ALIVE'),
          owned ? `${(owned.fraction * 100).toFixed(0)}% of ${formatBytes(owned.bytes)}` : '-',
          n.lastHeartbeat,
        ];
      }),
      { 'data-testid': 'nodes' },
    ),
  );
}

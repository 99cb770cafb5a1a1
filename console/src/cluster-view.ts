/**
 * Cluster: every query node as `berth nodes` lists it, with its share of the segments (its vCPU
 * weight over the live members': weighted ownership) and of the bytes it owns as bars, 100 nodes a
 * page; the meta replicas the coordinator calls, each probed; then the placement what-if.
 */
import { api } from './api.js';
import { bar, formatBytes, h, table } from './dom.js';
import { pageOf } from './paging.js';
import type { MetaReplica, NodeRow } from './types.js';
import { whatIfForm } from './what-if.js';

/** Rows drawn at once: a page stays quick to draw at 1,000 nodes. */
export const NODES_PER_PAGE = 100;
let page = 0;

export async function clusterView(): Promise<HTMLElement> {
  const [{ nodes }, { replicas }] = await Promise.all([
    api<{ nodes: NodeRow[] }>('/nodes'),
    api<{ replicas: MetaReplica[] }>('/meta'),
  ]);
  const ownedBytes = nodes.reduce((sum, n) => sum + (n.warmth?.owned?.bytes ?? 0), 0);
  const list = h('div', {});
  const draw = () => {
    const shown = pageOf(nodes, page, NODES_PER_PAGE);
    page = shown.page;
    const step = (by: number, id: string, label: string, disabled: boolean) => {
      const button = h('button', { type: 'button', id, disabled }, label);
      button.addEventListener('click', () => {
        page += by;
        draw();
        document.getElementById(id)?.focus();
      });
      return button;
    };
    list.replaceChildren(
      h(
        'nav',
        { class: 'pager', 'aria-label': 'pages of nodes' },
        step(-1, 'nodes-previous', 'Previous page', shown.page === 0),
        h(
          'span',
          { 'data-testid': 'nodes-page', 'aria-live': 'polite' },
          `nodes ${shown.from}–${shown.to} of ${shown.total}, page ${shown.page + 1} of ${shown.pages}`,
        ),
        step(1, 'nodes-next', 'Next page', shown.page === shown.pages - 1),
      ),
      table(
        'Query nodes',
        ['node', 'group', 'vCPU', 'share of segments', 'share of bytes', 'alive', 'warm', 'last heartbeat'],
        shown.items.map((n) => {
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
  };
  draw();
  return h(
    'section',
    { 'aria-labelledby': 'cluster-title', 'data-refresh-ms': '5000' },
    h('h2', { id: 'cluster-title' }, 'Cluster'),
    h('p', {}, `${nodes.length} query nodes, ${nodes.filter((n) => n.alive).length} alive.`),
    list,
    table(
      'Meta replicas (BERTH_META_URL), each asked on its own',
      ['replica', 'ready'],
      replicas.map((r) => [
        h('span', { 'data-testid': 'meta-url' }, r.url),
        h(
          'span',
          { class: r.ready ? 'ok' : 'bad', 'data-testid': 'meta-ready' },
          r.ready ? 'ready' : `NOT READY: ${r.error}`,
        ),
      ]),
      { 'data-testid': 'meta-replicas' },
    ),
    whatIfForm(nodes.filter((n) => n.share > 0).map((n) => n.id)),
  );
}

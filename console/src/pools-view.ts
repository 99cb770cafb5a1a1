/**
 * Heavy pools: each pool as `berth pool status` shows it: phase, target, pods, alive backends, and
 * the readiness layers as a pass/fail strip, with a link to its workflow in the Temporal Web UI.
 */
import { api } from './api.js';
import { formatTime, h } from './dom.js';
import { READINESS_LAYERS, type PoolView } from './types.js';

export async function poolsView(): Promise<HTMLElement> {
  const { pools } = await api<{ pools: PoolView[] }>('/pools');
  return h(
    'section',
    { 'aria-labelledby': 'pools-title', 'data-refresh-ms': '2000' },
    h('h2', { id: 'pools-title' }, 'Heavy pools'),
    pools.length === 0 ? h('p', {}, 'No heavy pool is configured.') : null,
    pools.map((p) => {
      const s = p.status;
      return h(
        'article',
        { class: 'card', 'data-testid': 'pool-card' },
        h('h3', {}, p.group),
        p.link
          ? h('p', {}, h('a', { href: p.link, target: '_blank', rel: 'noopener' }, `workflow ${p.workflowId}`))
          : null,
        p.error ? h('p', { class: 'bad' }, p.error) : null,
        s
          ? [
              h(
                'dl',
                {},
                h('dt', {}, 'phase'),
                h('dd', { 'data-testid': 'pool-phase' }, s.phase),
                h('dt', {}, 'target'),
                h('dd', {}, s.target),
                h('dt', {}, 'pods running'),
                h('dd', {}, s.podsRunning),
                h('dt', {}, 'alive backends'),
                h('dd', {}, s.aliveBackends),
                h('dt', {}, 'queries'),
                h('dd', {}, `${s.running} running, ${s.waiting} waiting`),
                h('dt', {}, 'serve-ready'),
                h('dd', {}, s.serveReady ? 'yes' : `no${s.notReady ? `: ${s.notReady}` : ''}`),
              ),
              h(
                'ol',
                { class: 'layers', 'aria-label': 'readiness layers' },
                READINESS_LAYERS.map((layer) => {
                  const passed = s.layersPassed.includes(layer);
                  return h(
                    'li',
                    { class: passed ? 'pass' : 'fail', 'data-testid': `layer-${layer}` },
                    `${layer}: ${passed ? 'passed' : 'not passed'}`,
                  );
                }),
              ),
              s.lastFailure
                ? h('p', { class: 'bad' }, `last failure ${formatTime(s.lastFailure.at)}: ${s.lastFailure.message}`)
                : null,
            ]
          : null,
      );
    }),
  );
}

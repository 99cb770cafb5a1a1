/**
 * Heavy pools: the admission of every workload group (SHOW WORKLOAD GROUPS), then each pool as
 * `berth pool status` shows it: phase, target, pods, alive backends, node-hours today and this
 * month, the readiness layers as a pass/fail strip, a link to its workflow in the Temporal Web UI,
 * the bill `berth cost` prints for the last 30 days, and its preflight on demand.
 */
import { api } from './api.js';
import { formatDollars, formatHours, formatTime, h, table } from './dom.js';
import { preflightBlock } from './preflight.js';
import { READINESS_LAYERS, type PoolCost, type PoolView, type WorkloadGroup } from './types.js';

const limit = (n: number | undefined) => (n === undefined ? '-' : n);

export async function poolsView(): Promise<HTMLElement> {
  const { pools, groups } = await api<{ pools: PoolView[]; groups: WorkloadGroup[] }>('/pools');
  return h(
    'section',
    { 'aria-labelledby': 'pools-title', 'data-refresh-ms': '2000' },
    h('h2', { id: 'pools-title' }, 'Heavy pools'),
    table(
      'Admission by workload group (the heavy pools’: over every coordinator)',
      ['group', 'running', 'waiting', 'max concurrency', 'max queue', ''],
      groups.map((g) => [g.name, g.running, g.waiting, limit(g.maxConcurrency), limit(g.maxQueueSize), g.unavailable]),
      { 'data-testid': 'admission' },
    ),
    pools.length === 0 ? h('p', {}, 'No heavy pool is configured.') : null,
    pools.map((p) => {
      const s = p.status;
      return h(
        'article',
        { class: 'card', 'data-testid': 'pool-card', 'aria-label': `pool ${p.group}` },
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
                s.idleDeadline ? [h('dt', {}, 'parks at'), h('dd', {}, formatTime(s.idleDeadline))] : null,
                h('dt', {}, 'node-hours today'),
                h('dd', { 'data-testid': 'pool-hours-today' }, s.nodeHours ? formatHours(s.nodeHours.today) : '-'),
                h('dt', {}, 'node-hours this month'),
                h('dd', { 'data-testid': 'pool-hours-month' }, s.nodeHours ? formatHours(s.nodeHours.month) : '-'),
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
        p.cost ? costTable(p.group, p.cost) : null,
        preflightBlock(p.group),
      );
    }),
  );
}

/** The bill as `berth cost GROUP` prints it with its defaults (30 days, the default price). */
function costTable(group: string, { window: w, bill: b }: PoolCost): HTMLElement {
  return table(
    `Cost over ${w.days} days from ${w.fromDay} (berth cost ${group})`,
    ['', 'amount', ''],
    [
      ['node-hours', h('span', { 'data-testid': 'cost-node-hours' }, formatHours(w.nodeHours)), `peak ${w.peak}`],
      ['price per node-hour', `$${b.pricePerNodeHour}`, ''],
      ['elastic pool', h('span', { 'data-testid': 'cost-pool' }, formatDollars(b.poolCost)), ''],
      [
        `resident ${b.residentNodes} node${b.residentNodes === 1 ? '' : 's'}`,
        h('span', { 'data-testid': 'cost-resident' }, formatDollars(b.residentCost)),
        `${w.hours.toFixed(1)} h`,
      ],
      ['saving', formatDollars(b.saving), ''],
    ],
    { 'data-testid': 'pool-cost' },
  );
}

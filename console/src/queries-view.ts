/**
 * Queries: the coordinator's recent queries (SQL, verdict and why, route, time), filtered by
 * verdict, and one query's details at #queries/ID.
 */
import { api } from './api.js';
import { formatBytes, formatTime, h, table } from './dom.js';
import type { RecentQuery } from './types.js';

/** `failed`: refused at planning, failed while running, or cancelled. */
type Filter = 'all' | 'light' | 'heavy' | 'failed';
let filter: Filter = 'all';

const verdictOf = (q: RecentQuery) => (q.stats ? q.stats.verdict.class : 'failed');
const whyOf = (q: RecentQuery) =>
  q.error ?? (q.stats?.verdict.class === 'heavy' ? `${q.stats.verdict.bottleneck}: ${q.stats.verdict.reason}` : '');

export async function queriesView(id?: number): Promise<HTMLElement> {
  const { queries } = await api<{ capacity: number; queries: RecentQuery[] }>('/queries');
  if (id !== undefined)
    return details(
      queries.find((q) => q.id === id),
      id,
    );
  const list = h('div', {});
  const draw = () => {
    const shown = queries.filter((q) => filter === 'all' || verdictOf(q) === filter);
    list.replaceChildren(
      table(
        `${shown.length} of ${queries.length} recent queries, newest first`,
        ['#', 'time', 'SQL', 'verdict', 'why', 'route', 'ms', ''],
        shown.map((q) => [
          q.id,
          formatTime(q.at),
          h('code', { class: 'sql' }, q.sql.length > 120 ? `${q.sql.slice(0, 120)}…` : q.sql),
          h('span', { class: `verdict ${verdictOf(q)}` }, verdictOf(q)),
          whyOf(q),
          q.stats?.route ?? '-',
          q.stats ? Math.round(q.stats.elapsedMs) : '-',
          h('a', { href: `#queries/${q.id}`, 'aria-label': `details of query ${q.id}` }, 'details'),
        ]),
        { 'data-testid': 'queries' },
      ),
    );
  };
  const select = h(
    'select',
    { id: 'verdict-filter' },
    (['all', 'light', 'heavy', 'failed'] as const).map((v) => h('option', { value: v, selected: v === filter }, v)),
  );
  select.addEventListener('change', () => {
    filter = select.value as Filter;
    draw();
  });
  draw();
  return h(
    'section',
    { 'aria-labelledby': 'queries-title' },
    h('h2', { id: 'queries-title' }, 'Queries'),
    h(
      'p',
      {},
      'Queries kept: ',
      h('span', { 'data-testid': 'query-count' }, queries.length),
      ' (the last this coordinator answered or refused over HTTP).',
    ),
    h('label', { for: 'verdict-filter' }, 'Verdict '),
    select,
    list,
  );
}

function details(q: RecentQuery | undefined, id: number): HTMLElement {
  const back = h('a', { href: '#queries' }, '← all queries');
  if (!q) return h('section', {}, h('h2', {}, `Query ${id}`), h('p', {}, 'No longer kept.'), back);
  const s = q.stats;
  const facts: [string, string | number][] = s
    ? [
        ['verdict', s.verdict.class === 'heavy' ? `heavy (${s.verdict.bottleneck}): ${s.verdict.reason}` : 'light'],
        ['route', s.route + (s.reason ? `: ${s.reason}` : '')],
        ['group', s.group],
        ['final stage', s.stages.final],
        ['result', s.result],
        ['plan', s.plan],
        ['rows', q.rows ?? 'streamed'],
        ['elapsed', `${s.elapsedMs.toFixed(1)} ms`],
        [
          'where the time went',
          `plan ${s.timings.planMs} ms · queued ${s.timings.queuedMs} ms · scan ${s.timings.scanMs} ms · final ${s.timings.finalMs} ms`,
        ],
        ['segments', `${s.segments.scanned} scanned, ${s.segments.pruned} pruned of ${s.segments.total}`],
        ['scan bytes', formatBytes(s.scanBytes)],
        ['bytes moved', formatBytes(s.bytesMoved)],
        ['cache', `${s.cacheHits} hits, ${s.cacheMisses} misses`],
        [
          'segments per node',
          Object.entries(s.nodes)
            .map(([n, c]) => `${n}: ${c}`)
            .join(', ') || '-',
        ],
        ...(s.pool
          ? ([['heavy pool', `${s.pool.workflowId}, waited ${s.pool.waitedMs} ms`]] as [string, string][])
          : []),
      ]
    : [['failed', q.error ?? '']];
  return h(
    'section',
    { 'aria-labelledby': 'query-title', 'data-testid': 'query-details' },
    h('h2', { id: 'query-title' }, `Query ${q.id}`),
    h('p', {}, formatTime(q.at)),
    h('pre', { class: 'sql', 'data-testid': 'query-sql' }, q.sql),
    h(
      'dl',
      {},
      facts.flatMap(([k, v]) => [h('dt', {}, k), h('dd', {}, v)]),
    ),
    back,
  );
}

/**
 * Tables: each table as `berth table show` prints it: schema, segments, bytes, time range,
 * retention, and its segments by day as a small chart.
 */
import { api } from './api.js';
import { dayChart } from './day-chart.js';
import { formatBytes, formatTime, h, table } from './dom.js';
import type { SegmentDay, TableDetails, TableInfo } from './types.js';

const DAY_MS = 86_400_000;
const retention = (ms: number | null) =>
  ms === null ? 'kept for good' : ms % DAY_MS === 0 ? `${ms / DAY_MS} days` : `${ms / 1000} s`;

export async function tablesView(): Promise<HTMLElement> {
  const { tables } = await api<{ tables: TableInfo[] }>('/tables');
  const details = await Promise.all(
    tables.map(async (t) => {
      const path = `/tables/${encodeURIComponent(t.name)}`;
      const [info, { days }] = await Promise.all([
        api<TableDetails>(path),
        api<{ days: SegmentDay[] }>(`${path}/days`),
      ]);
      return { ...info, days };
    }),
  );
  return h(
    'section',
    { 'aria-labelledby': 'tables-title' },
    h('h2', { id: 'tables-title' }, 'Tables'),
    details.length === 0 ? h('p', {}, 'No tables yet: ingest some rows (berth ingest).') : null,
    details.map((t) =>
      h(
        'article',
        { class: 'card', 'data-testid': 'table-card' },
        h('h3', {}, t.name),
        h(
          'dl',
          {},
          h('dt', {}, 'segments'),
          h('dd', { 'data-testid': 'table-segments' }, t.segments.toLocaleString('en')),
          h('dt', {}, 'rows'),
          h('dd', {}, t.rows.toLocaleString('en')),
          h('dt', {}, 'bytes'),
          h('dd', {}, formatBytes(t.bytes)),
          h('dt', {}, 'time range'),
          h(
            'dd',
            {},
            t.timestampColumn === null ? 'no timestamp' : `${formatTime(t.oldest)} – ${formatTime(t.newest)}`,
          ),
          h('dt', {}, 'retention'),
          h('dd', {}, retention(t.retentionMs)),
          h('dt', {}, 'schema version'),
          h('dd', {}, h('code', {}, t.schema)),
        ),
        t.timestampColumn === null ? null : dayChart(t.name, t.days),
        table(
          `${t.name}: columns`,
          ['column', 'type'],
          t.columns.map((c) => [c.name + (c.name === t.timestampColumn ? ' (timestamp)' : ''), c.type]),
        ),
      ),
    ),
  );
}

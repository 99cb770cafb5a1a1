/**
 * A table's segments by day as small vertical bars: plain elements, each bar labelled with its day
 * and count (read out by screen readers, shown on hover), the tallest day at full height.
 */
import { h } from './dom.js';
import type { SegmentDay } from './types.js';

export function dayChart(table: string, days: SegmentDay[]): HTMLElement {
  const most = Math.max(1, ...days.map((d) => d.segments));
  return h(
    'figure',
    { class: 'days', 'data-testid': 'segment-days' },
    h('figcaption', {}, `${table}: segments by day of their oldest row (UTC)`),
    days.length === 0
      ? h('p', {}, 'No segments yet.')
      : h(
          'ol',
          { class: 'day-bars' },
          days.map((d) => {
            const label = `${d.day}: ${d.segments} segment${d.segments === 1 ? '' : 's'}, ${d.rows.toLocaleString('en')} rows`;
            const column = h('span', { class: 'column' });
            column.style.height = `${(d.segments / most) * 100}%`;
            return h(
              'li',
              { 'data-testid': 'segment-day', 'data-day': d.day, title: label, 'aria-label': label },
              h('span', { class: 'count', 'data-testid': 'segment-day-count' }, d.segments),
              h('span', { class: 'track' }, column),
              h('span', { class: 'day' }, d.day.slice(5)),
            );
          }),
        ),
  );
}

/** The one-table catalog and segment rows that meta's store and API tests share. */
import type { Segment } from '../../services/meta/store.js';

export const table = { name: 'events', timestampColumn: 'ts', columns: [{ name: 'ts', type: 'TIMESTAMP' }] };
/** `table` as meta answers it once created: its first incarnation. */
export const createdTable = { ...table, incarnation: 1 };

/** A level-0 segment of `events` (10 rows over the first second), with `extra` laid over it. */
export const segment = (id: string, extra: Partial<Segment> = {}): Segment => ({
  id,
  table: 'events',
  minTs: 0,
  maxTs: 1000,
  rows: 10,
  bytes: 100,
  level: 0,
  ...extra,
});

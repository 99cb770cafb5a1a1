/**
 * The coordinator's copy of the catalog: each table's schema and its active segments, indexed by
 * time (segment-index.ts), kept until meta's version of the table says they changed (the
 * manifest version moves with every commit, swap and retirement, the schema digest with the
 * schema). Each query checks the version once, one indexed row in meta and no segment list, so a
 * query sees every segment committed before it arrived, whoever committed it (an ingest on any
 * coordinator, a merge). After a change only the change is read (meta's change log); the whole
 * manifest is read, a page at a time, only on a table's first query or when the log no longer
 * reaches back to the index's version. That first read takes seconds at a million segments
 * (SCALING.md): meanwhile a query whose time range spans at most RANGE_READ_MAX_SPAN_MS reads its
 * range alone from meta (its index bounds both ends) instead of waiting for it. Queries that arrive
 * while a check is in flight share the next one: a check that began after each of them arrived.
 */
import type { MetaClient, SegmentRow, TableInfo, TableVersion } from '../../meta/client.js';
import { SegmentIndex } from './segment-index.js';

/**
 * The widest time range a query reads from meta while its table's first read runs: a month
 * (82,200 segments in SCALING.md's run, a 16.5 MiB read). A wider one waits for the index.
 */
export const RANGE_READ_MAX_SPAN_MS = 31 * 86_400_000;

/** A table as of one version check. */
export interface CheckedTable {
  info: TableInfo;
  version: TableVersion;
}

interface Entry {
  /** The schema and the digest it was fetched under. */
  info?: { schema: string; table: Promise<TableInfo | undefined> };
  index?: SegmentIndex;
  /** The index's move to a newer version, shared by the queries that wait for it; it sets `index`. */
  syncing?: Promise<SegmentIndex>;
  /** While the first read runs: the table's segment count, asked once for the range reads meanwhile. */
  count?: Promise<number>;
  /** The check in flight, and the one queued behind it for queries that arrived after it began. */
  check?: Promise<TableVersion | undefined>;
  next?: Promise<TableVersion | undefined>;
}

export class TableCatalog {
  private readonly entries = new Map<string, Entry>();

  constructor(
    private readonly meta: Pick<
      MetaClient,
      'tableVersion' | 'findTable' | 'manifestChanges' | 'manifestPage' | 'listSegments' | 'tableStats'
    >,
  ) {}

  /** The table as it is now (a check that began after this call), or undefined when it does not exist. */
  async table(name: string): Promise<CheckedTable | undefined> {
    const entry = this.entry(name);
    const version = await this.check(name, entry);
    if (!version) {
      this.entries.delete(name);
      return undefined;
    }
    if (entry.info?.schema !== version.schema) {
      const table = this.meta.findTable(name);
      entry.info = { schema: version.schema, table };
      table.catch(() => {
        if (entry.info?.table === table) entry.info = undefined;
      });
    }
    const info = await entry.info.table;
    return info && { info, version };
  }

  /**
   * The table's active segments that meet [from, to], as of `table`'s version check or later, and
   * how many it has in all.
   */
  async segments(
    name: string,
    table: CheckedTable,
    window: { from?: number; to?: number } = {},
  ): Promise<{ segments: SegmentRow[]; total: number }> {
    const entry = this.entry(name);
    if (
      !entry.index &&
      window.from !== undefined &&
      (window.to ?? Date.now()) - window.from <= RANGE_READ_MAX_SPAN_MS
    ) {
      void this.sync(name, entry).catch(() => undefined); // the index, for the queries after this one
      // Counting the table scans all of its rows in meta: once for every query while the read runs.
      const count = (entry.count ??= this.meta.tableStats(name).then((stats) => stats.segments));
      try {
        // The range is read after this query's check: as of its version or later.
        const [segments, total] = await Promise.all([this.meta.listSegments(name, window), count]);
        // The count may predate segments committed since: it is the query's statistics, not its answer.
        return { segments, total: Math.max(total, segments.length) };
      } catch {
        if (entry.count === count) entry.count = undefined;
        // Not answered: wait for the index below, as a wider range does.
      }
    }
    let index = entry.index;
    // A sync that began before this query's check may stop short of its version: then another.
    while (!index || index.version < table.version.manifest) index = await this.sync(name, entry);
    return { segments: index.inRange(window.from, window.to), total: index.size };
  }

  /** Moves the entry's index to meta's current version, one move at a time, shared by whoever asks meanwhile. */
  private sync(name: string, entry: Entry): Promise<SegmentIndex> {
    entry.syncing ??= this.synced(name, entry.index)
      .then((index) => {
        entry.count = undefined;
        return (entry.index = index);
      })
      .finally(() => (entry.syncing = undefined));
    return entry.syncing;
  }

  /** The index at meta's current version: `index` moved by the changes since, else the manifest read whole. */
  private async synced(name: string, index: SegmentIndex | undefined): Promise<SegmentIndex> {
    if (index) {
      const changes = await this.meta.manifestChanges(name, index.version);
      if (changes !== 'snapshot' && changes.incarnation === index.incarnation) {
        index.apply(changes);
        return index;
      }
    }
    // A page at a time, all of one version: one consistent manifest.
    const first = await this.meta.manifestPage(name);
    const segments = [...first.segments];
    for (let next = first.next; next !== undefined;) {
      const page = await this.meta.manifestPage(name, { version: first.version, after: next });
      segments.push(...page.segments);
      next = page.next;
    }
    return SegmentIndex.of(first.version, first.incarnation, segments);
  }

  private entry(name: string): Entry {
    let entry = this.entries.get(name);
    if (!entry) this.entries.set(name, (entry = {}));
    return entry;
  }

  /** A version check that began after this call: the one in flight if none is, else the next. */
  private check(name: string, entry: Entry): Promise<TableVersion | undefined> {
    const start = () => {
      const check = this.meta.tableVersion(name);
      entry.check = check;
      const done = () => {
        if (entry.check === check) entry.check = undefined;
      };
      check.then(done, done);
      return check;
    };
    if (!entry.check) return start();
    entry.next ??= entry.check
      .then(
        () => undefined,
        () => undefined,
      )
      .then(() => {
        entry.next = undefined;
        return start();
      });
    return entry.next;
  }
}

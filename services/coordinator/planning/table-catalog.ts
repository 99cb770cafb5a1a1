/**
 * The coordinator's copy of the catalog: each table's schema and active segments, kept until
 * meta's version of the table says they changed (services/meta: the manifest version moves with
 * every commit, swap and retirement, the schema digest with the schema). Each query checks the
 * version once, one indexed row in meta and no segment list, so a query sees every segment
 * committed before it arrived, whoever committed it (an ingest on any coordinator, a merge), and
 * the segment list is fetched again only after a change. Queries that arrive while a check is in
 * flight share the next one: a check that began after each of them arrived.
 */
import type { MetaClient, SegmentRow, TableInfo, TableVersion } from '../../meta/client.js';

/** A table as of one version check. */
export interface CheckedTable {
  info: TableInfo;
  version: TableVersion;
}

interface Entry {
  /** The schema and the digest it was fetched under. */
  info?: { schema: string; table: Promise<TableInfo | undefined> };
  segments?: { manifest: number; list: Promise<SegmentRow[]> };
  /** The check in flight, and the one queued behind it for queries that arrived after it began. */
  check?: Promise<TableVersion | undefined>;
  next?: Promise<TableVersion | undefined>;
}

export class TableCatalog {
  private readonly entries = new Map<string, Entry>();

  constructor(private readonly meta: Pick<MetaClient, 'tableVersion' | 'findTable' | 'listSegments'>) {}

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

  /** The table's active segments, as of `version` or later: fetched once per manifest version. */
  async segments(name: string, version: TableVersion): Promise<SegmentRow[]> {
    const entry = this.entry(name);
    if (!entry.segments || entry.segments.manifest < version.manifest) {
      const list = this.meta.listSegments(name);
      entry.segments = { manifest: version.manifest, list };
      list.catch(() => {
        if (entry.segments?.list === list) entry.segments = undefined;
      });
    }
    return await entry.segments.list;
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

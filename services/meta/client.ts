/**
 * A typed client for the meta service, used by query nodes, the coordinator and activities. It takes
 * one meta URL or several (BERTH_META_URL is a comma-separated list) and fails over between them: a
 * call that gets no answer, or a 5xx, is made again on the next replica. Every meta operation is
 * idempotent (see store.ts), so repeating a call that may already have landed changes nothing. A
 * 4xx is an answer and is never retried. The replica that answered last is asked first next time.
 * When no replica answers, the error is a 503 that says so and why, which services pass on as it is.
 */
import { unavailable } from '../common/errors.js';
import { callJson, callJsonIfChanged, ServiceCallError, type CallOptions } from '../common/http-client.js';
import { RETIRED_LISTED } from './api.js';
import type {
  Backend,
  ColumnSpec,
  DroppedTable,
  DropRetired,
  Fence,
  LeaseGrant,
  ManifestChanges,
  ManifestPage,
  Member,
  NewTable,
  NodeRegistration,
  Retention,
  RowDelete,
  RowDeleteReport,
  RowDeleteRequest,
  Segment,
  SegmentRow,
  SegmentRowsRemoval,
  TableInfo,
  TableStats,
  TableVersion,
} from './api.js';

// The shapes it takes and returns are meta's wire contract (api.ts).
export type * from './api.js';

/** The meta URLs in a comma-separated list, without trailing slashes. */
export function parseMetaUrls(urls: string | readonly string[]): string[] {
  const list = (typeof urls === 'string' ? urls.split(',') : urls)
    .map((u) => u.trim().replace(/\/+$/, ''))
    .filter(Boolean);
  if (list.length === 0) throw new Error('no meta URL given');
  return list;
}

export class MetaClient {
  readonly urls: readonly string[];
  private preferred = 0;

  constructor(
    urls: string | readonly string[],
    private readonly token: string,
  ) {
    this.urls = parseMetaUrls(urls);
  }

  /** The replica asked first: the one that answered last. */
  get url(): string {
    return this.urls[this.preferred]!;
  }

  /** Calls `path` on the preferred replica, then on the others (and at least twice: behind one load-balanced URL a second try reaches another replica). */
  private call<T>(path: string, options: CallOptions = {}): Promise<T> {
    return this.onReplicas((url) => callJson<T>(`${url}${path}`, options), options.signal);
  }

  /** Runs `attempt` on the preferred replica, then on the others; a refusal (4xx) or an abandoned call is the answer. */
  private async onReplicas<T>(attempt: (url: string) => Promise<T>, signal?: AbortSignal): Promise<T> {
    let failure: unknown;
    const first = this.preferred; // read once: concurrent calls move it
    for (let tries = 0; tries < Math.max(2, this.urls.length); tries++) {
      const index = (first + tries) % this.urls.length;
      try {
        const result = await attempt(this.urls[index]!);
        this.preferred = index;
        return result;
      } catch (error) {
        if (signal?.aborted || (error instanceof ServiceCallError && error.status < 500)) throw error;
        failure = error;
      }
    }
    throw unavailable('meta_unavailable', `the meta service is unavailable: ${(failure as Error).message}`);
  }

  /** Resolves when meta answers its readiness probe. */
  ping(timeoutMs = 2_000): Promise<void> {
    return this.call('/readyz', { timeoutMs });
  }

  registerNode(node: NodeRegistration): Promise<void> {
    return this.call('/v1/nodes', { body: node, token: this.token });
  }

  /** Leaves the cluster on purpose: readers stop routing to the node on their next poll. */
  deregisterNode(id: string, timeoutMs = 2_000): Promise<{ removed: boolean }> {
    return this.call(`/v1/nodes/${encodeURIComponent(id)}`, { method: 'DELETE', token: this.token, timeoutMs });
  }

  heartbeat(id: string, vcpus: number): Promise<void> {
    return this.call(`/v1/nodes/${encodeURIComponent(id)}/heartbeat`, { body: { vcpus }, token: this.token });
  }

  async members(group: string): Promise<Member[]> {
    return (await this.call<{ members: Member[] }>(`/v1/groups/${encodeURIComponent(group)}/members`)).members;
  }

  /**
   * The group's members once their version is no longer `etag`, waiting up to `waitMs` for a
   * change (a long poll); 'unchanged' when none came.
   */
  async membersChanged(
    group: string,
    etag: string | undefined,
    waitMs: number,
    signal?: AbortSignal,
  ): Promise<{ members: Member[]; etag: string | undefined } | 'unchanged'> {
    const path = `/v1/groups/${encodeURIComponent(group)}/members?wait=${waitMs}`;
    const answer = await this.onReplicas(
      (url) => callJsonIfChanged<{ members: Member[] }>(`${url}${path}`, etag, { timeoutMs: waitMs + 10_000, signal }),
      signal,
    );
    return answer.changed ? { members: answer.body.members, etag: answer.etag } : 'unchanged';
  }

  async backends(group?: string): Promise<Backend[]> {
    const query = group === undefined ? '' : `?group=${encodeURIComponent(group)}`;
    return (await this.call<{ backends: Backend[] }>(`/v1/backends${query}`)).backends;
  }

  ensureTable(table: NewTable): Promise<TableInfo> {
    const { name, ...body } = table;
    return this.call(`/v1/tables/${name}`, { method: 'PUT', body, token: this.token });
  }

  /**
   * Changes the types of a table's columns, never their names or order; lands only while the
   * table still has the columns `from` (a 409 `table_changed` otherwise). Repeating it is a no-op.
   */
  setColumnTypes(table: string, from: ColumnSpec[], to: ColumnSpec[]): Promise<TableInfo> {
    return this.call(`/v1/tables/${encodeURIComponent(table)}/column-types`, {
      method: 'PUT',
      body: { from, to },
      token: this.token,
    });
  }

  /** Appends the columns the table lacks (schema evolution); answers the table as it then is. Repeating it is a no-op. */
  addColumns(table: string, columns: ColumnSpec[]): Promise<TableInfo> {
    return this.call(`/v1/tables/${encodeURIComponent(table)}/columns`, {
      method: 'POST',
      body: { columns },
      token: this.token,
    });
  }

  /** Sets how long a table's rows are kept (ms of age), or with null keeps them for good. */
  async setRetention(table: string, retentionMs: number | null): Promise<void> {
    await this.call(`/v1/tables/${encodeURIComponent(table)}/retention`, {
      ...(retentionMs === null ? { method: 'DELETE' } : { method: 'PUT', body: { retentionMs } }),
      token: this.token,
    });
  }

  /** Drops that incarnation of the table (see DropQuery); repeating it is a no-op. */
  async dropTable(table: string, incarnation: number): Promise<void> {
    await this.call(`/v1/tables/${encodeURIComponent(table)}?incarnation=${incarnation}`, {
      method: 'DELETE',
      token: this.token,
    });
  }

  /** The dropped tables some of whose segments are still active. */
  async drops(): Promise<DroppedTable[]> {
    return (await this.call<{ drops: DroppedTable[] }>('/v1/drops')).drops;
  }

  /** Retires at most `limit` active segments of a dropped incarnation; `more` says whether any is left. */
  retireDropped(table: string, incarnation: number, limit: number): Promise<DropRetired> {
    return this.call(`/v1/tables/${encodeURIComponent(table)}/drop/retire`, {
      body: { incarnation, limit },
      token: this.token,
    });
  }

  /** Records a delete by predicate (see RowDeleteRequest) for the delete workflow. */
  requestDelete(table: string, request: RowDeleteRequest): Promise<RowDelete> {
    return this.call(`/v1/tables/${encodeURIComponent(table)}/deletes`, { body: request, token: this.token });
  }

  /** The deletes by predicate not finished yet, oldest first. */
  async pendingDeletes(): Promise<RowDelete[]> {
    return (await this.call<{ deletes: RowDelete[] }>('/v1/deletes')).deletes;
  }

  /** Removes one segment's matching rows for a delete, in one write (see SegmentRowsRemoval). */
  async removeRows(deleteId: number, removal: SegmentRowsRemoval): Promise<void> {
    await this.call(`/v1/deletes/${deleteId}/segments`, { body: removal, token: this.token });
  }

  /** Records a delete as finished (the first finish stands) and answers its account. */
  finishDelete(id: number): Promise<RowDeleteReport> {
    return this.call(`/v1/deletes/${id}/finish`, { body: {}, token: this.token });
  }

  /** A delete's record and account so far. */
  deleteReport(id: number): Promise<RowDeleteReport> {
    return this.call(`/v1/deletes/${id}`);
  }

  /** How a table's active segments changed after manifest version `since`, or 'snapshot' when the log no longer reaches back so far. */
  async manifestChanges(table: string, since: number): Promise<ManifestChanges | 'snapshot'> {
    try {
      return await this.call(`/v1/tables/${encodeURIComponent(table)}/changes?since=${since}`);
    } catch (error) {
      if (error instanceof ServiceCallError && error.status === 410) return 'snapshot';
      throw error;
    }
  }

  /** A page of a table's active segments as of a manifest version (see ManifestQuery). */
  manifestPage(table: string, page: { version?: number; after?: string; limit?: number } = {}): Promise<ManifestPage> {
    const query = new URLSearchParams(
      Object.entries(page)
        .filter(([, v]) => v !== undefined)
        .map(([k, v]): [string, string] => [k, String(v)]),
    );
    return this.call(`/v1/tables/${encodeURIComponent(table)}/manifest?${query}`);
  }

  /** A table's active segments, counted and summed; a 404 for a table that does not exist. */
  tableStats(table: string): Promise<TableStats> {
    return this.call(`/v1/tables/${encodeURIComponent(table)}/stats`);
  }

  /** Every table that has a retention period. */
  async retentions(): Promise<Retention[]> {
    return (await this.call<{ retentions: Retention[] }>('/v1/retentions')).retentions;
  }

  /** Retires active segments without a replacement (retention); retired ones stay as they were. */
  async retireSegments(ids: string[]): Promise<void> {
    await this.call('/v1/segments/retire', { body: { ids }, token: this.token });
  }

  /** The table, or undefined when it does not exist. */
  async findTable(name: string): Promise<TableInfo | undefined> {
    try {
      return await this.call<TableInfo>(`/v1/tables/${encodeURIComponent(name)}`);
    } catch (error) {
      if (error instanceof ServiceCallError && error.code === 'table_not_found') return undefined;
      throw error;
    }
  }

  /** The table's manifest and schema versions, or undefined when it does not exist. */
  async tableVersion(name: string): Promise<TableVersion | undefined> {
    try {
      return await this.call<TableVersion>(`/v1/tables/${encodeURIComponent(name)}/version`);
    } catch (error) {
      if (error instanceof ServiceCallError && error.status === 404) return undefined;
      throw error;
    }
  }

  async listTables(): Promise<TableInfo[]> {
    return (await this.call<{ tables: TableInfo[] }>('/v1/tables')).tables;
  }

  async listSegments(table: string, range: { from?: number; to?: number } = {}): Promise<SegmentRow[]> {
    const query = new URLSearchParams();
    if (range.from !== undefined) query.set('from', String(range.from));
    if (range.to !== undefined) query.set('to', String(range.to));
    return (await this.call<{ segments: SegmentRow[] }>(`/v1/tables/${encodeURIComponent(table)}/segments?${query}`))
      .segments;
  }

  getSegment(id: string): Promise<SegmentRow> {
    return this.call(`/v1/segments/${encodeURIComponent(id)}`);
  }

  commitSegment(segment: Segment): Promise<SegmentRow> {
    return this.call('/v1/segments', { body: segment, token: this.token });
  }

  /** With a fence, the swap commits only while the lease still carries its token (a 409 `lease_lost` otherwise). */
  swapSegments(retire: string[], add: Segment, fence?: Fence): Promise<SegmentRow> {
    return this.call('/v1/segments/swap', { body: { retire, add, ...(fence ? { fence } : {}) }, token: this.token });
  }

  /** At most `limit` retired segments whose objects may still exist, retired before `before`, oldest first. */
  async listRetired(before: number, limit = RETIRED_LISTED): Promise<SegmentRow[]> {
    return (await this.call<{ segments: SegmentRow[] }>(`/v1/segments/retired?before=${before}&limit=${limit}`))
      .segments;
  }

  /** Records these retired segments' objects gone (at most 10,000 at once). */
  forgetSegments(ids: string[]): Promise<void> {
    return this.call('/v1/segments/forget', { body: { ids }, token: this.token });
  }

  /** Deletes at most `limit` retired rows past meta's dedup window whose objects are gone; returns how many. */
  async purgeRetired(limit: number): Promise<number> {
    return (await this.call<{ purged: number }>('/v1/segments/purge', { body: { limit }, token: this.token })).purged;
  }

  async knownSegments(ids: string[]): Promise<string[]> {
    return (await this.call<{ known: string[] }>('/v1/segments/known', { body: { ids } })).known;
  }

  /** Takes or renews a lease; when another holder has it, `granted` is false and `lease` says whose it is until when. */
  acquireLease(name: string, holder: string, ttlMs: number): Promise<LeaseGrant> {
    return this.call(`/v1/leases/${encodeURIComponent(name)}/acquire`, { body: { holder, ttlMs }, token: this.token });
  }

  /** Releases every lease `holder` holds; returns their names. */
  async releaseLeasesOf(holder: string): Promise<string[]> {
    return (
      await this.call<{ released: string[] }>('/v1/leases/release-holder', { body: { holder }, token: this.token })
    ).released;
  }

  async releaseLease(name: string, holder: string): Promise<boolean> {
    return (
      await this.call<{ released: boolean }>(`/v1/leases/${encodeURIComponent(name)}/release`, {
        body: { holder },
        token: this.token,
      })
    ).released;
  }
}

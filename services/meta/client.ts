/** A typed client for the meta service, used by query nodes, the coordinator and activities. */
import { HttpError } from '../common/errors.js';
import { callJson, ServiceCallError, type CallOptions } from '../common/http-client.js';
import type { Backend, ColumnSpec, Lease, Member, Segment, SegmentRow, TableInfo } from './store.js';

export type { Backend, ColumnSpec, Lease, Member, Segment, SegmentRow, TableInfo };

/**
 * Every call goes through `call`: when meta cannot be reached (or fails inside), the error is a
 * 503 that says so and why, which services pass on as it is instead of a bare 500.
 */
export class MetaClient {
  constructor(
    readonly baseUrl: string,
    private readonly token: string,
  ) {}

  /** Resolves when meta answers its readiness probe. */
  ping(timeoutMs = 2_000): Promise<void> {
    return this.call(`${this.baseUrl}/readyz`, { timeoutMs });
  }

  private async call<T>(url: string, options: CallOptions = {}): Promise<T> {
    try {
      return await callJson<T>(url, options);
    } catch (error) {
      if (error instanceof ServiceCallError && error.status < 500) throw error;
      throw new HttpError(503, 'meta_unavailable', `the meta service is unavailable: ${(error as Error).message}`);
    }
  }

  registerNode(node: { id: string; group: string; url: string; vcpus: number; startedAt: number }): Promise<void> {
    return this.call(`${this.baseUrl}/v1/nodes`, { body: node, token: this.token });
  }

  /** Leaves the cluster on purpose: readers stop routing to the node on their next poll. */
  deregisterNode(id: string, timeoutMs = 2_000): Promise<{ removed: boolean }> {
    return this.call(`${this.baseUrl}/v1/nodes/${encodeURIComponent(id)}`, { method: 'DELETE', token: this.token, timeoutMs });
  }

  heartbeat(id: string, vcpus: number): Promise<void> {
    return this.call(`${this.baseUrl}/v1/nodes/${encodeURIComponent(id)}/heartbeat`, { body: { vcpus }, token: this.token });
  }

  async members(group: string): Promise<Member[]> {
    return (await this.call<{ members: Member[] }>(`${this.baseUrl}/v1/groups/${encodeURIComponent(group)}/members`)).members;
  }

  async backends(group?: string): Promise<Backend[]> {
    const query = group === undefined ? '' : `?group=${encodeURIComponent(group)}`;
    return (await this.call<{ backends: Backend[] }>(`${this.baseUrl}/v1/backends${query}`)).backends;
  }

  ensureTable(table: TableInfo): Promise<TableInfo> {
    const { name, ...body } = table;
    return this.call(`${this.baseUrl}/v1/tables/${name}`, { method: 'PUT', body, token: this.token });
  }

  /** The table, or undefined when it does not exist. */
  async findTable(name: string): Promise<TableInfo | undefined> {
    try {
      return await this.call<TableInfo>(`${this.baseUrl}/v1/tables/${encodeURIComponent(name)}`);
    } catch (error) {
      if (error instanceof ServiceCallError && error.status === 404) return undefined;
      throw error;
    }
  }

  async listTables(): Promise<TableInfo[]> {
    return (await this.call<{ tables: TableInfo[] }>(`${this.baseUrl}/v1/tables`)).tables;
  }

  async listSegments(table: string, range: { from?: number; to?: number } = {}): Promise<SegmentRow[]> {
    const query = new URLSearchParams();
    if (range.from !== undefined) query.set('from', String(range.from));
    if (range.to !== undefined) query.set('to', String(range.to));
    const url = `${this.baseUrl}/v1/tables/${encodeURIComponent(table)}/segments?${query}`;
    return (await this.call<{ segments: SegmentRow[] }>(url)).segments;
  }

  getSegment(id: string): Promise<SegmentRow> {
    return this.call(`${this.baseUrl}/v1/segments/${encodeURIComponent(id)}`);
  }

  commitSegment(segment: Segment): Promise<SegmentRow> {
    return this.call(`${this.baseUrl}/v1/segments`, { body: segment, token: this.token });
  }

  swapSegments(retire: string[], add: Segment): Promise<SegmentRow> {
    return this.call(`${this.baseUrl}/v1/segments/swap`, { body: { retire, add }, token: this.token });
  }

  async listRetired(before: number): Promise<SegmentRow[]> {
    return (await this.call<{ segments: SegmentRow[] }>(`${this.baseUrl}/v1/segments/retired?before=${before}`)).segments;
  }

  forgetSegment(id: string): Promise<void> {
    return this.call(`${this.baseUrl}/v1/segments/${encodeURIComponent(id)}`, { method: 'DELETE', token: this.token });
  }

  async knownSegments(ids: string[]): Promise<string[]> {
    return (await this.call<{ known: string[] }>(`${this.baseUrl}/v1/segments/known`, { body: { ids } })).known;
  }

  /** Takes or renews a lease; when another holder has it, `granted` is false and `lease` says whose it is until when. */
  acquireLease(name: string, holder: string, ttlMs: number): Promise<{ granted: boolean; lease: Lease }> {
    return this.call(`${this.baseUrl}/v1/leases/${encodeURIComponent(name)}/acquire`, { body: { holder, ttlMs }, token: this.token });
  }

  /** Releases every lease `holder` holds; returns their names. */
  async releaseLeasesOf(holder: string): Promise<string[]> {
    return (await this.call<{ released: string[] }>(`${this.baseUrl}/v1/leases/release-holder`, { body: { holder }, token: this.token })).released;
  }

  async releaseLease(name: string, holder: string): Promise<boolean> {
    return (await this.call<{ released: boolean }>(`${this.baseUrl}/v1/leases/${encodeURIComponent(name)}/release`, { body: { holder }, token: this.token })).released;
  }
}

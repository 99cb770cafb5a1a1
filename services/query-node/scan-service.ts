/**
 * A query node's scan: holds the segments a coordinator asks for, runs its SQL over them with
 * DuckDB and streams the rows as Arrow IPC, then says how the scan ended.
 *
 * Each segment is read from the memory tier when it holds it, else from the disk cache: a segment
 * not cached comes as its footer first, then only the columns the query reads. Only an owner keeps
 * what it reads, and every node a broadcast join's small tables; a read of a segment whose owner
 * is down passes through. What a scan holds is let go once DuckDB is done with it.
 */
import pLimit from 'p-limit';
import type { Counter } from 'prom-client';
import { arrowStream } from '../common/arrow-exchange.js';
import { ResultCutShort } from '../common/duckdb.js';
import { httpAnswerOf, resultTooLarge } from '../common/errors.js';
import type { MemberView } from '../common/member-view.js';
import { scannedColumns, type OpenScan, type Scanner, type TableFiles } from '../common/scanner.js';
import type { ScanFailure, ScanRequest, ScanStats } from './api.js';
import type { HeldSegment, SegmentCache } from './segment-cache.js';
import type { HeldTable, SegmentMemory } from './segment-memory.js';
import type { SegmentSchemas } from './segment-schema.js';

export interface ScanServiceOptions {
  nodeId: string;
  cache: SegmentCache;
  /** Owned segments scanned again, held as DuckDB tables: read instead of their files. */
  memory: SegmentMemory;
  /** Refuses a scan of a segment whose columns disagree with its table's. */
  schemas: SegmentSchemas;
  scanner: Scanner;
  view: MemberView;
  /** Parallel S3 fetches per scan. @default 8 */
  fetchConcurrency?: number;
  metrics: {
    /** Scans ended, by outcome (answered, failed). */
    scans: Counter<'outcome'>;
    /** Segments read, by role (owner, fallback) and cache (hit, miss). */
    segmentReads: Counter<'role' | 'cache'>;
  };
}

/** Where a scan's answer goes: its Arrow IPC bytes, then how it ended. */
export interface ScanSink {
  /** False: write no more until the sink drains. */
  write(bytes: Buffer): boolean;
  onDrain(listener: () => void): void;
  /** The scan ended: answered, or cut short by `failure`. Called once. */
  end(stats: ScanStats, failure?: ScanFailure): void;
}

/** A scan whose segments are held and whose DuckDB result is open, ready to stream. */
export interface ReadyScan {
  /** Writes the rows to `sink` as DuckDB makes them, then ends it. */
  streamTo(sink: ScanSink): void;
}

export class ScanService {
  constructor(private readonly options: ScanServiceOptions) {}

  /**
   * Holds the request's segments and opens its scan; when that fails, lets go of them and throws.
   * `signal` aborts when the coordinator hangs up (its client left or its deadline passed): DuckDB
   * stops then.
   */
  async open(request: ScanRequest, signal: AbortSignal): Promise<ReadyScan> {
    const started = performance.now();
    const { cache, memory, schemas, scanner, view, nodeId, metrics } = this.options;
    const limit = pLimit(this.options.fetchConcurrency ?? 8);
    const held: HeldSegment[] = [];
    const heldTables: HeldTable[] = [];
    /** Disk segments offered to the memory tier: each is let go when its load settles. */
    const offered = new Map<HeldSegment, Promise<void>>();
    /** Lets go of what the scan holds once `reading` (a second run for DuckDB's reason) is done. */
    const release = (reading?: Promise<unknown>) => {
      const segments = held.splice(0);
      const tables = heldTables.splice(0);
      void Promise.allSettled([reading]).then(() => {
        for (const table of tables) table.release();
        for (const segment of segments) void (offered.get(segment) ?? Promise.resolve()).then(() => segment.release());
      });
    };
    let scan: OpenScan;
    let tables: TableFiles[];
    /** The segments of the scan's own share: not those of tables every owner reads whole. */
    let share = 0;
    // Cache affinity: a read of a segment this node owns, or one that fell to it (its owner is down).
    const placement = view.placement;
    try {
      // A segment in the memory tier is read from its table; the others from their files.
      const acquired = await settleAll(
        request.tables.map(async (table) => ({
          table,
          segments: await settleAll(
            table.segments.map((id) =>
              limit(async () => {
                // A standby's read (its owner is down) passes through; a broadcast join's small tables come back.
                const owned = placement?.owner(id)?.id === nodeId;
                const role = owned ? 'owner' : table.broadcast ? 'broadcast' : 'fallback';
                const inMemory = memory.hold(id);
                if (inMemory) {
                  heldTables.push(inMemory);
                  metrics.segmentReads.inc({ role, cache: 'hit' });
                  const shape = await schemas.check(id, { table: inMemory.sql }, scannedColumns(table));
                  return { id, owned, role, inMemory, shape };
                }
                cache.locate(id, table.objects?.[id]);
                const segment = await cache.acquire(table.name, id, { partial: true, keep: role !== 'fallback' });
                held.push(segment);
                // Before anything reads it, and before the memory tier is offered it: only its footer may be here yet.
                const shape = await schemas.check(id, { file: segment.path }, scannedColumns(table));
                // The columns the coordinator named are fetched in any case (below): start on them as soon
                // as the footer is here, rather than after every segment's footer and DuckDB's plan.
                if (!segment.complete && table.columns) await segment.ensure(table.columns);
                return { id, owned, role, segment, shape };
              }),
            ),
          ),
        })),
      );
      share = acquired.reduce((sum, { table, segments }) => sum + (table.broadcast ? 0 : segments.length), 0);
      tables = acquired.map(({ table, segments }) => ({
        name: table.name,
        schema: table.schema,
        columns: table.columns,
        files: segments.flatMap(({ segment }) => (segment ? [segment.path] : [])),
        inMemory: segments.flatMap(({ inMemory }) => (inMemory ? [inMemory.sql] : [])),
        shapes: new Map(
          segments.map(({ segment, inMemory, shape }) => [segment?.path ?? inMemory!.sql, shape] as const),
        ),
      }));
      // A segment that was not cached came as its footer: fetch the columns the query reads, and no others.
      if (held.some((s) => !s.complete)) {
        const columns = await scanner.columnsRead(request.sql, tables, request.parameters).catch(() => undefined); // cannot tell: fetch everything
        await settleAll(held.map((segment) => limit(() => segment.ensure(columns))));
      }
      for (const { segments } of acquired)
        for (const { id, owned, role, segment } of segments) {
          if (!segment) continue;
          // Counted once its columns are here: a segment held in part may have needed more of them (a miss).
          metrics.segmentReads.inc({ role, cache: segment.hit ? 'hit' : 'miss' });
          // An owned segment whole on disk goes to the memory tier on its second scan.
          if (owned && segment.kept && segment.complete) offered.set(segment, memory.offer(id, segment.path));
        }
      scan = await scanner.open(request.sql, tables, signal, request.parameters);
    } catch (error) {
      release();
      metrics.scans.inc({ outcome: 'failed' });
      throw error;
    }
    const stats: ScanStats = {
      node: nodeId,
      segments: share,
      hits: held.filter((s) => s.hit).length + heldTables.length,
      misses: held.filter((s) => !s.hit).length,
      s3Gets: held.filter((s) => s.bytesFetched > 0).length,
      bytesFromS3: held.reduce((sum, s) => sum + s.bytesFetched, 0),
      readThrough: held.filter((s) => !s.kept).length,
      rows: 0,
      bytes: 0,
      ms: 0,
    };
    return {
      streamTo: (sink) => {
        const maxBytes = request.maxResultBytes ?? Infinity;
        const body = arrowStream(scan.result, (rows) => (stats.rows += rows));
        let finished = false;
        /** A second run for DuckDB's reason (below): the segments stay held until it ends. */
        let reasoning: Promise<unknown> | undefined;
        const finish = (error?: unknown) => {
          if (finished) return;
          finished = true;
          body.destroy();
          scan.close(error === undefined);
          release(reasoning);
          stats.ms = Math.round(performance.now() - started);
          const failure = error === undefined ? undefined : scanError(scanner.explain(error, tables));
          metrics.scans.inc({ outcome: error === undefined ? 'answered' : 'failed' });
          sink.end(stats, failure);
        };
        // Written by hand rather than piped, so that a chunk past the cap is never written after the end.
        body.on('data', (bytes: Buffer) => {
          stats.bytes += bytes.length;
          if (stats.bytes > maxBytes) return finish(resultTooLarge(maxBytes));
          if (!sink.write(bytes)) body.pause();
        });
        sink.onDrain(() => body.resume());
        body.once('end', () => finish());
        body.once('error', (error) => {
          if (!(error instanceof ResultCutShort) || finished || signal.aborted) return finish(error);
          // DuckDB does not say why it cut a streamed result short: run the scan again, its rows discarded, for the reason.
          reasoning = scanner.reason(request.sql, tables, signal, request.parameters);
          reasoning.then(
            (reason) => finish(reason ?? error),
            () => finish(error),
          );
        });
        // Aborted already (the coordinator hung up as the scan opened): no 'abort' is coming.
        if (signal.aborted) finish(signal.reason);
        else signal.addEventListener('abort', () => finish(signal.reason), { once: true });
      },
    };
  }
}

/**
 * Promise.all that waits for every promise to settle before it rejects: a scan that fails on one
 * segment releases its pins only once no acquire of another is still in flight, or those would
 * be pinned for good.
 */
async function settleAll<T>(promises: Promise<T>[]): Promise<T[]> {
  const settled = await Promise.allSettled(promises);
  const failed = settled.find((s) => s.status === 'rejected');
  if (failed) throw failed.reason;
  return settled.map((s) => (s as PromiseFulfilledResult<T>).value);
}

/** What the trailer says about a scan cut short: the status the coordinator answers with, and why. */
function scanError(error: unknown): ScanFailure {
  const answer = httpAnswerOf(error);
  if (answer) return { status: answer.status, error: answer.code, message: answer.message };
  return {
    status: 500,
    error: 'scan_failed',
    message: error instanceof Error ? error.message.split('\n')[0]! : String(error),
  };
}

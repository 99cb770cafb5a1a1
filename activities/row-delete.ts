/**
 * The delete-by-predicate activity: every active segment of the table in the predicate's time
 * range is read, and one that holds matching rows is rewritten without them through the merge's
 * machinery (the same sort, the same push to its owner) or, when every row matches, retired. Meta
 * takes each segment's removal in one write: the segment retired, its replacement added, and the
 * rows removed recorded against the delete, so the delete's account is exact whichever worker dies
 * when. A rewritten segment's id is a function of its input and the predicate, so a retry writes
 * the same object; a segment already done is no longer listed. No lease: a merge that takes a
 * segment first makes meta refuse the removal (the rows are then in the merged segment, which the
 * next pass reads), and a removal that lands first makes the merge's swap lose its race.
 * Rows ingested while a delete runs are removed when they match and their segment is read after
 * they landed: a delete promises that no row matching it is left once it finishes.
 */
import { createHash } from 'node:crypto';
import { createWriteStream } from 'node:fs';
import { mkdir, rm, stat } from 'node:fs/promises';
import path from 'node:path';
import type { Readable } from 'node:stream';
import { pipeline } from 'node:stream/promises';
import { Context } from '@temporalio/activity';
import { partitionOf, quoteIdent, segmentId } from '../core/identifiers.js';
import { epochMsSql, TIMELESS } from '../core/time-bounds.js';
import { sqlString, withConnection } from '../services/common/duckdb.js';
import { SegmentObjects } from '../services/common/segment-objects.js';
import { ServiceCallError } from '../services/common/http-client.js';
import { segmentShapes } from '../services/common/parquet-columns.js';
import { segmentsSql } from '../services/common/scanner.js';
import type { Segment, SegmentRow, SegmentRowsRemoved, TableInfo } from '../services/meta/api.js';
import { DELETE_FLAG, type RowDeleteResult, type RowDeleteTask } from '../workflows/contracts/row-delete.js';
import { runLongStep, type LongStep } from './heartbeat.js';
import { pushSegment, type MergeActivityDeps } from './merge.js';
import { followedFile, uploadSegmentFile } from './segment-publish.js';

/** Passes over the table before a delete that keeps racing merges gives up (and is retried). */
const MAX_PASSES = 10;

/** The id of a segment rewritten without the rows the predicate matches: its input's, and the predicate's. */
export function rewrittenSegmentId(table: string, input: SegmentRow, predicate: string): string {
  const digest = createHash('sha256').update(`${input.id}\n${predicate}`).digest('hex').slice(0, 20);
  return segmentId(table, input.level, partitionOf(input.minTs), digest);
}

export const createRowDeleteActivities = (deps: MergeActivityDeps) => ({
  async deleteMatchingRows(task: RowDeleteTask): Promise<RowDeleteResult> {
    return await runLongStep(async (step) => {
      let removedHere = 0; // by this attempt, for the Web UI; meta keeps the account
      for (let pass = 1; ; pass++) {
        const table = await deps.meta.findTable(task.table);
        // Dropped since: nothing of it is left to delete from.
        if (!table || table.incarnation !== task.incarnation) break;
        const range = {
          ...(task.from === null ? {} : { from: task.from }),
          ...(task.to === null ? {} : { to: task.to }),
        };
        const segments = (await deps.meta.listSegments(task.table, range)).sort((a, b) => a.id.localeCompare(b.id));
        let raced = false;
        for (const [i, segment] of segments.entries()) {
          step.signal.throwIfAborted();
          step.progress({ pass, segment: segment.id, of: segments.length, done: i, rowsRemoved: removedHere });
          const outcome = await removeMatchingRows(deps, task, table, segment, step);
          if (outcome === 'raced') raced = true;
          else if (outcome) {
            removedHere += outcome.removed;
            console.error(`delete ${task.id} of ${task.table}: ${JSON.stringify(outcome)}`);
          }
        }
        if (!raced) break;
        if (pass === MAX_PASSES) throw new Error(`merges kept taking segments of ${task.table} for ${pass} passes`);
      }
      const { rowsRemoved, segmentsRewritten, segmentsRetired, perSegment } = await deps.meta.finishDelete(task.id);
      return { rowsRemoved: rowsRemoved!, segmentsRewritten, segmentsRetired, perSegment };
    });
  },
});

export type RowDeleteActivities = ReturnType<typeof createRowDeleteActivities>;

/**
 * Removes the matching rows of one segment: what it removed, undefined when none matched, or
 * 'raced' when the segment was no longer there to take them from (a merge took it, the table went).
 */
async function removeMatchingRows(
  deps: MergeActivityDeps,
  task: RowDeleteTask,
  table: TableInfo,
  segment: SegmentRow,
  step: LongStep,
): Promise<SegmentRowsRemoved | 'raced' | undefined> {
  const { signal } = step;
  const dir = path.join(deps.workDir, `delete-${segment.id}-${Context.current().info.attempt}`);
  await mkdir(dir, { recursive: true });
  try {
    const input = path.join(dir, 'input.parquet');
    // An attached segment is read where it lies; its rewrite is Berth's own, in Berth's bucket.
    const object = await new SegmentObjects({ s3: deps.s3, bucket: deps.bucket }, deps.profiles).get(
      { table: table.name, id: segment.id, ...(segment.object ? { object: segment.object } : {}) },
      undefined,
      signal,
    );
    await pipeline(object.Body as Readable, createWriteStream(input), { signal });
    const id = rewrittenSegmentId(table.name, segment, task.predicate);
    const output = path.join(dir, `${id}.parquet`);
    const counted = await withConnection(
      deps.duckdb,
      async (c) => {
        // The predicate reads the table by name: a view of this segment with every column of the table.
        const shapes = await segmentShapes(c, [input], table.columns);
        const lacking = shapes.get(input)!.lacking;
        await c.run(
          `CREATE TEMP VIEW ${quoteIdent(table.name)} AS ${segmentsSql({ name: table.name, schema: table.columns, files: [input], shapes })}`,
        );
        const [matched, rows] = (
          await c.runAndReadAll(`SELECT count(*) FILTER (WHERE ${DELETE_FLAG}), count(*) FROM (${task.predicate})`)
        )
          .getRows()[0]!
          .map(Number);
        if (matched === 0 || matched === rows) return { matched: matched!, rows: rows! };
        // The rows the predicate is not true for, with the columns the segment holds, sorted as a merge sorts.
        const held = table.columns.map((col) => col.name).filter((name) => !lacking.includes(name));
        const ts = table.timestampColumn;
        const order = [...(ts === null ? [] : [ts]), ...held.filter((n) => n !== ts)].map(quoteIdent).join(', ');
        await c.run(
          `COPY (SELECT ${held.map(quoteIdent).join(', ')} FROM (${task.predicate}) WHERE ${DELETE_FLAG} IS NOT TRUE ORDER BY ${order}) TO ${sqlString(output)} (FORMAT parquet)`,
        );
        const range =
          ts === null
            ? `${TIMELESS.minTs}, ${TIMELESS.maxTs}`
            : `${epochMsSql(`min(${quoteIdent(ts)})`, 'floor')}, ${epochMsSql(`max(${quoteIdent(ts)})`, 'ceil')}`;
        const [minTs, maxTs] = (await c.runAndReadAll(`SELECT ${range} FROM read_parquet(${sqlString(output)})`))
          .getRows()[0]!
          .map(Number);
        return { matched: matched!, rows: rows!, minTs: minTs!, maxTs: maxTs! };
      },
      signal,
    );
    if (counted.matched === 0) return undefined;
    let replacement: Segment | undefined;
    if (counted.minTs !== undefined) {
      replacement = {
        id,
        table: table.name,
        minTs: counted.minTs,
        maxTs: counted.maxTs!,
        rows: counted.rows - counted.matched,
        bytes: (await stat(output)).size,
        level: segment.level,
      };
      step.progress({ step: 'upload and push', segment: segment.id, rewritten: id });
      // Read from the file as it is, a window at a time: the worker never holds the whole segment.
      const written = Promise.resolve();
      await uploadSegmentFile(deps.s3, deps.bucket, { table: table.name, id }, { file: output, written }, signal);
      await pushSegment(deps, table.name, id, async () => followedFile(output, written, signal), signal);
    }
    try {
      await deps.meta.removeRows(task.id, { segment: segment.id, removed: counted.matched, replacement });
    } catch (error) {
      // Taken by a merge, or the table dropped: the next pass looks again. An uploaded replacement
      // that never committed is the janitor's to delete.
      if (error instanceof ServiceCallError && RACED.has(error.code ?? '')) return 'raced';
      throw error;
    }
    return { segment: segment.id, removed: counted.matched, replacedBy: replacement?.id ?? null };
  } finally {
    await rm(dir, { recursive: true, force: true });
  }
}

/** What meta answers a removal whose segment is no longer the table's to take rows from. */
const RACED = new Set(['segment_retired', 'table_not_found', 'table_recreated']);

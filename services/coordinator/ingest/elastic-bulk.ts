/**
 * Elasticsearch's bulk format in, Elasticsearch's per-item answer out. Each `index` or `create`
 * action's document becomes a row of the table its index names, and each document is judged alone
 * (JSON, nesting, the timestamp, the table's columns, the typing rule for its new fields), so a bad
 * one is its own 400 while the rest commit, and a batch that fails whole (S3 or meta down) answers
 * each of its items 429, the status every shipper retries. A new field is typed by the rule over
 * the documents that bring it, except that, as Elasticsearch maps a field by its first document, a
 * value of another kind is refused rather than turning the field into JSON.
 *
 * Per table one batch through the ingestor: the accepted document lines as they were sent, in
 * order. A request sent again (its answer lost, or the shipper killed) gives the same lines, so the
 * same segment id, and commits once; the items a shipper retries alone make a request of their own.
 */
import { Readable } from 'node:stream';
import { ColumnInference, isDigits, TypingRefusal } from '../../../core/json-typing.js';
import { TABLE_NAME } from '../../../core/identifiers.js';
import { badRequest, DomainError } from '../../common/errors.js';
import { ndjsonLines } from '../../common/ndjson-lines.js';
import type { MetaClient, TableInfo } from '../../meta/client.js';
import { ALREADY_COMMITTED, type Ingestor } from './ingest.js';
import { parseRowStrictly, RowShapes } from './ndjson-rows.js';
import { checkColumnLimits } from './segment-writer.js';

/** The timestamp column of a table that `_bulk` creates. */
export const BULK_TIMESTAMP_COLUMN = '@timestamp';

export const BULK_ACTIONS = ['index', 'create', 'update', 'delete'] as const;
export type BulkAction = (typeof BULK_ACTIONS)[number];

/** One action of a bulk body: its index (from the action, or the path), its `_id`, its document line. */
export interface BulkItem {
  action: BulkAction;
  index?: string;
  id?: string;
  document?: string;
}

/** What Elasticsearch answers for one item, under its action's name. */
export interface ItemAnswer {
  _index: string | null;
  _id: string | null;
  status: number;
  result?: 'created';
  _version?: number;
  _shards?: { total: number; successful: number; failed: number };
  error?: { type: string; reason: string };
}

/** How many of a request's rows were committed, refused for what they are, or failed and may be sent again. */
export interface BulkCounts {
  committed: number;
  refused: number;
  failed: number;
}

/** Thrown (as a 400 for the whole request, as Elasticsearch does) for a body that is not bulk NDJSON. */
const malformed = (line: number, why: string) => badRequest('malformed_bulk', `line ${line}: ${why}`);

/** The action line's name and metadata: `{"index": {"_index": "logs", "_id": "1"}}`. */
function parseAction(text: string, line: number): Omit<BulkItem, 'document'> {
  let parsed: unknown;
  try {
    parsed = JSON.parse(text);
  } catch {
    throw malformed(line, 'an action line must be a JSON object such as {"index":{"_index":"logs"}}');
  }
  const keys = parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed) ? Object.keys(parsed) : [];
  const action = keys[0] as BulkAction;
  if (keys.length !== 1 || !BULK_ACTIONS.includes(action))
    throw malformed(line, `expected one of the actions ${BULK_ACTIONS.join(', ')}, found ${text.slice(0, 80)}`);
  const meta = (parsed as Record<string, unknown>)[action];
  if (meta === null || typeof meta !== 'object' || Array.isArray(meta))
    throw malformed(line, `the ${action} action's metadata must be an object`);
  const { _index: index, _id: id } = meta as Record<string, unknown>;
  if (index !== undefined && typeof index !== 'string') throw malformed(line, '_index must be a string');
  if (id !== undefined && typeof id !== 'string' && typeof id !== 'number')
    throw malformed(line, '_id must be a string');
  return { action, ...(index !== undefined ? { index } : {}), ...(id !== undefined ? { id: String(id) } : {}) };
}

/** The items of a bulk body, in order; `pathIndex` is the index of `POST /{index}/_bulk`. */
export async function parseBulk(body: Buffer, pathIndex?: string): Promise<BulkItem[]> {
  const items: BulkItem[] = [];
  let waiting: BulkItem | undefined; // an action whose document line comes next
  let line = 0;
  for await (const text of ndjsonLines(Readable.from([body]))) {
    line++;
    if (waiting) {
      items.push({ ...waiting, document: text });
      waiting = undefined;
      continue;
    }
    if (text.trim() === '') continue;
    const item = parseAction(text, line);
    item.index ??= pathIndex;
    if (item.action === 'delete') items.push(item);
    else waiting = item;
  }
  if (waiting) throw malformed(line, `the ${waiting.action} action has no document line after it`);
  return items;
}

/** A name for `index` that Berth takes as a table name, to suggest. */
const tableNameLike = (index: string) => {
  const name = index.toLowerCase().replace(/[^a-z0-9_]+/g, '_');
  return (/^[a-z]/.test(name) ? name : `t_${name}`).slice(0, 63);
};

/** Whether a parsed value nests deeper than `levels` objects and arrays (the row itself is one). */
function deeperThan(value: unknown, levels: number): boolean {
  if (value === null || typeof value !== 'object' || isDigits(value)) return false;
  if (levels === 0) return true;
  for (const item of Array.isArray(value) ? value : Object.values(value as object))
    if (deeperThan(item, levels - 1)) return true;
  return false;
}

/** How many JSON columns or fields a type has: one more means values of several kinds met somewhere in it. */
const jsonCount = (type: string) => type.match(/\bJSON\b/g)?.length ?? 0;

/** JavaScript objects treat this key specially; ingest refuses it. */
const PROTO = '__proto__';

/**
 * The documents of one request bound for one table: each taken or refused alone, against the
 * table's columns and, for fields the table lacks, the typing rule over the documents taken so far
 * (a copy of the inference tries each one). What it takes, the ingestor takes: the same checks,
 * the same rule over the same rows in the same order.
 */
class TableDocuments {
  private readonly lines: string[] = [];
  private readonly columns: RowShapes;
  private readonly known: Set<string>;
  private readonly timestampColumn: string | null;
  private fresh: ColumnInference | undefined;
  /** The types the documents taken so far give the fields the table lacks. */
  private freshTypes = new Map<string, string>();

  constructor(
    private readonly info: TableInfo | undefined,
    private readonly maxDepth: number,
  ) {
    this.timestampColumn = info ? info.timestampColumn : BULK_TIMESTAMP_COLUMN;
    this.columns = new RowShapes(info?.columns ?? []);
    this.known = new Set((info?.columns ?? []).map((c) => c.name.toLowerCase()));
  }

  get size(): number {
    return this.lines.length;
  }

  /** The rows taken, as NDJSON. */
  ndjson(): Buffer {
    return Buffer.from(`${this.lines.join('\n')}\n`);
  }

  /** Takes a document as a row, or says why it does not fit. */
  offer(document: string): string | undefined {
    let row: unknown;
    try {
      row = parseRowStrictly(document);
    } catch (error) {
      // eslint-disable-next-line no-control-regex -- control bytes are what it replaces
      return `not valid JSON (${(error as Error).message.replace(/[\u0000-\u001f\u007f]/g, '\ufffd')})`;
    }
    if (row === null || typeof row !== 'object' || Array.isArray(row) || isDigits(row)) return 'not a JSON object';
    if (deeperThan(row, this.maxDepth)) return `nested deeper than ${this.maxDepth} levels (BERTH_INGEST_MAX_DEPTH)`;
    const fields = row as Record<string, unknown>;
    const ts = this.timestampColumn;
    if (ts !== null && (fields[ts] === undefined || fields[ts] === null))
      return `has no "${ts}", the table's timestamp column (an ISO 8601 string such as "2026-11-01T00:00:00Z")`;
    const entries = Object.entries(fields);
    if (entries.some(([field]) => field === PROTO)) return `a field may not be named ${PROTO}`;
    const isKnown = ([field]: [string, unknown]) => this.known.has(field.toLowerCase());
    const misfit = this.columns.misfit(Object.fromEntries(entries.filter(isKnown)));
    if (misfit) return misfit.why;
    const fresh = Object.fromEntries(entries.filter((entry) => !isKnown(entry)));
    if (Object.keys(fresh).length === 0) {
      this.lines.push(document);
      return undefined;
    }
    // New fields: typed by the rule over every document taken so far and this one.
    const probe = (this.fresh ?? new ColumnInference()).clone();
    let columns;
    try {
      probe.add(fresh);
      columns = probe.columns(this.info || ts === null ? undefined : ts);
      checkColumnLimits([...(this.info?.columns ?? []), ...columns]);
    } catch (error) {
      if (error instanceof TypingRefusal || error instanceof DomainError) return error.message;
      throw error;
    }
    // As Elasticsearch maps a field by the first document that has it, a value of another kind is
    // refused, rather than making the field a JSON column for every document before and after it.
    for (const column of columns) {
      const before = this.freshTypes.get(column.name);
      if (before !== undefined && jsonCount(column.type) > jsonCount(before))
        return `field "${column.name}" is ${before} in the documents before this one, and this document's value is of another kind`;
    }
    const freshMisfit = new RowShapes(columns).misfit(fresh);
    if (freshMisfit) return freshMisfit.why;
    this.freshTypes = new Map(columns.map((c) => [c.name, c.type]));
    this.fresh = probe;
    this.lines.push(document);
    return undefined;
  }
}

export interface BulkIngestOptions {
  ingestor: Ingestor;
  meta: MetaClient;
  /** Deepest nesting a document may have (BERTH_INGEST_MAX_DEPTH). */
  maxDepth: number;
  /** Told of failures that are Berth's own (answered 500). */
  onInternalError(error: unknown): void;
}

/** Times a table's batch is tried when the table changed under it (created or widened by another request meanwhile). */
const ATTEMPTS = 3;

/** How a batch that failed whole is answered for each of its items: 429 is what every shipper sends again. */
function failureOf(error: unknown, options: BulkIngestOptions): Required<Pick<ItemAnswer, 'status' | 'error'>> {
  if (error instanceof DomainError && error.kind === 'invalid')
    return { status: 400, error: { type: error.code, reason: error.message } };
  if (error instanceof DomainError && error.kind !== 'inconsistent')
    return { status: 429, error: { type: error.code, reason: `${error.message} (not committed: send it again)` } };
  options.onInternalError(error);
  return { status: 500, error: { type: 'internal', reason: 'internal error; see the coordinator log' } };
}

const refused = (type: string, reason: string) => ({ status: 400, error: { type, reason } });

/**
 * Commits the documents of a bulk request, one batch per table, and answers each item as
 * Elasticsearch would: 201 once committed, else its status and error.
 */
export async function ingestBulk(
  items: BulkItem[],
  options: BulkIngestOptions,
): Promise<{ answers: ItemAnswer[]; counts: BulkCounts }> {
  const answers: ItemAnswer[] = items.map((item) => ({ _index: item.index ?? null, _id: item.id ?? null, status: 0 }));
  const answer = (i: number, outcome: Omit<ItemAnswer, '_index' | '_id'> & { _id?: string }) =>
    (answers[i] = { _index: items[i]!.index ?? null, _id: items[i]!.id ?? null, ...outcome });
  const counts: BulkCounts = { committed: 0, refused: 0, failed: 0 };
  const byTable = new Map<string, number[]>();
  for (const [i, item] of items.entries()) {
    if (item.action === 'update' || item.action === 'delete')
      answer(
        i,
        refused(
          'unsupported_action',
          `Berth appends rows: ${item.action} is not supported (delete rows with berth delete or POST /v1/tables/:table/deletes)`,
        ),
      );
    else if (item.index === undefined)
      answer(i, refused('missing_index', 'the action names no _index, and the path no index'));
    else if (!TABLE_NAME.test(item.index))
      answer(
        i,
        refused(
          'invalid_index_name',
          `index "${item.index.slice(0, 80)}" is not a Berth table name (lower-case letters, digits and _, starting with a letter, at most 63): send it as "${tableNameLike(item.index)}"`,
        ),
      );
    else byTable.set(item.index, [...(byTable.get(item.index) ?? []), i]);
  }

  for (const [table, indexes] of byTable) {
    for (let attempt = 1; ; attempt++) {
      let info: TableInfo | undefined;
      let documents: TableDocuments;
      const taken: number[] = [];
      try {
        info = await options.meta.findTable(table);
        documents = new TableDocuments(info, options.maxDepth);
        for (const i of indexes) {
          const why = documents.offer(items[i]!.document!);
          if (why === undefined) taken.push(i);
          else answer(i, refused('row_does_not_fit', why));
        }
        if (taken.length === 0) break;
        const { segment, push } = await options.ingestor.ingest(
          table,
          Readable.from([documents.ndjson()]),
          info ? undefined : BULK_TIMESTAMP_COLUMN,
        );
        for (const [n, i] of taken.entries())
          answer(i, {
            _id: items[i]!.id ?? `${segment.id}.${n}`,
            _version: 1,
            result: 'created',
            _shards: { total: 1, successful: 1, failed: 0 },
            status: 201,
          });
        if (push.reason !== ALREADY_COMMITTED) counts.committed += taken.length;
        break;
      } catch (error) {
        // The table changed between the checks and the commit: check the documents again.
        if (error instanceof DomainError && error.kind === 'invalid' && attempt < ATTEMPTS) {
          const now = await options.meta.findTable(table).catch(() => info);
          if (JSON.stringify(now) !== JSON.stringify(info)) continue;
        }
        const failure = failureOf(error, options);
        for (const i of taken.length > 0 ? taken : indexes) answer(i, failure);
        break;
      }
    }
  }
  for (const answer of answers)
    if (answer.status === 400) counts.refused++;
    else if (answer.status >= 400) counts.failed++;
  return { answers, counts };
}

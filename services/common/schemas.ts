/** TypeBox shapes shared by more than one service's API. */
import { Type, type Static, type TSchema } from 'typebox';
import { COLUMN_NAME, MAX_COLUMN_NAME_LENGTH, NODE_ID, SEGMENT_ID, TABLE_NAME } from '../../core/identifiers.js';

export const TableName = Type.String({ pattern: TABLE_NAME.source });
export const SegmentId = Type.String({ pattern: SEGMENT_ID.source });
export const NodeId = Type.String({ pattern: NODE_ID.source });
/** Compute groups are named as node ids are. */
export const GroupName = Type.String({ pattern: NODE_ID.source });
/** An http(s) URL, as nodes advertise themselves. */
export const HttpUrl = (options: { maxLength?: number } = {}) => Type.String({ pattern: '^https?://', ...options });
/** A table's timestamp column, as ingest names it and meta records it. */
export const TimestampColumn = Type.String({ pattern: COLUMN_NAME.source });

/** A column of a table's schema, as meta records it and a scan request carries it. */
/** The longest column type meta keeps (a STRUCT spells out its fields). */
export const MAX_COLUMN_TYPE_LENGTH = 500;
/** The most columns meta keeps for a table. */
export const MAX_COLUMNS = 2000;

export const ColumnSpec = Type.Object({
  name: Type.String({ minLength: 1, maxLength: MAX_COLUMN_NAME_LENGTH }),
  type: Type.String({ minLength: 1, maxLength: MAX_COLUMN_TYPE_LENGTH }),
});
export type ColumnSpec = Static<typeof ColumnSpec>;

/** Every error a service answers with (see errors.ts): a code callers branch on, and what was wrong. */
export const ErrorBody = Type.Object({ error: Type.String(), message: Type.String() });
export type ErrorBody = Static<typeof ErrorBody>;

/** The answer of a call that has nothing to report but its success. */
export const Ok = Type.Object({ ok: Type.Literal(true) });

/**
 * A route's response schemas: `ok` for a success, the error body for a failure. Fastify serializes
 * with them, and drops a field the schema does not list: an open body says so (Type.Record, Type.Unknown).
 */
export const answers = <T extends TSchema>(ok: T) => ({ 200: ok, '4xx': ErrorBody, '5xx': ErrorBody });

/**
 * A response whose shape another layer's contract defines (a workflow's query, a core report),
 * written as TypeScript there: sent as it is (no field dropped) and typed as it is there.
 */
export const DefinedIn = <T>(where: string) => Type.Unsafe<T>(Type.Unknown({ description: `as ${where} defines it` }));

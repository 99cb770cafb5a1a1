/** TypeBox shapes shared by more than one service's API. */
import { Type } from 'typebox';
import { COLUMN_NAME, NODE_ID, SEGMENT_ID, TABLE_NAME } from '../../core/identifiers.js';

export const TableName = Type.String({ pattern: TABLE_NAME.source });
export const SegmentId = Type.String({ pattern: SEGMENT_ID.source });
export const NodeId = Type.String({ pattern: NODE_ID.source });
/** Compute groups are named as node ids are. */
export const GroupName = Type.String({ pattern: NODE_ID.source });
/** A table's timestamp column, as ingest names it and meta records it. */
export const TimestampColumn = Type.String({ pattern: COLUMN_NAME.source });

export const SegmentSchema = Type.Object(
  {
    id: SegmentId,
    table: TableName,
    minTs: Type.Integer(),
    maxTs: Type.Integer(),
    rows: Type.Integer({ minimum: 0 }),
    bytes: Type.Integer({ minimum: 0 }),
    level: Type.Integer({ minimum: 0, maximum: 16 }),
  },
  { additionalProperties: false },
);

/** TypeBox shapes shared by more than one service's API. */
import { Type } from 'typebox';
import { NODE_ID, SEGMENT_ID, TABLE_NAME } from '../../core/identifiers.js';

export const TableName = Type.String({ pattern: TABLE_NAME.source });
export const SegmentId = Type.String({ pattern: SEGMENT_ID.source });
export const NodeId = Type.String({ pattern: NODE_ID.source });

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

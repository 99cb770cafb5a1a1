/**
 * What a final stage's inputs look like, wherever the final stage runs (the coordinator, or a heavy
 * backend for a heavy query): the wire contract of both.
 */
import { Type, type Static } from 'typebox';

/**
 * A column of what the owners send. The exchange carries every type exactly as DuckDB holds it
 * except a few (ENUM, UNION and the like): those travel as text and are cast back in the final
 * stage, which is exact for them.
 */
export const ExchangeColumn = Type.Object(
  {
    /** The column's name in the final stage's input. */
    name: Type.String({ minLength: 1 }),
    type: Type.String({ minLength: 1 }),
    /** Sent as VARCHAR (column `c<i>` of the owner's result) and cast back. */
    asText: Type.Boolean(),
  },
  { additionalProperties: false },
);
export type ExchangeColumn = Static<typeof ExchangeColumn>;

/** One input of a final stage: the name the final SQL reads it by, and the columns the scan stage sends. */
export const ExchangeInput = Type.Object(
  { name: Type.String({ minLength: 1 }), columns: Type.Array(ExchangeColumn) },
  { additionalProperties: false },
);
export type ExchangeInput = Static<typeof ExchangeInput>;

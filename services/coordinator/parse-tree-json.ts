/**
 * DuckDB's parse trees (json_serialize_sql) read and written without losing a digit. JSON.parse
 * would turn every number into a double: 9007199254740993 becomes ...992, a UBIGINT or a HUGEINT
 * half loses its low bits, and the query that runs is not the query that was sent. Here integers
 * past 2^53 become bigints (exact, and kept by structuredClone), and the doubles JSON cannot
 * spell (Infinity, NaN, -0.0) become casts from text, which DuckDB folds back into the same value.
 */
import { isInteger, isSafeNumber, parse, stringify } from 'lossless-json';
import type { AstNode } from '../../core/query-plan.js';

/** Marks a double that JSON cannot carry; only ever the value of a DOUBLE or FLOAT constant. */
const SPECIAL = '\u0000double:';

/** Reads the JSON of json_serialize_sql. */
export function readParseTree(json: string): unknown {
  // DuckDB writes the non-finite doubles as bare words, which no JSON parser accepts. They can
  // only stand after "value": (a user's text is always inside a JSON string, where a quote is \").
  const text = json.replace(/"value":(-?Infinity|NaN)(?=[,}])/g, (_, word: string) => `"value":"${SPECIAL}${word}"`);
  const tree = parse(text, null, (digits) => {
    if (isInteger(digits)) return isSafeNumber(digits) ? Number(digits) : BigInt(digits);
    const value = Number(digits);
    return Object.is(value, -0) ? `${SPECIAL}-0.0` : value;
  });
  return replaceSpecialDoubles(tree);
}

/** Writes a parse tree as JSON for json_deserialize_sql, bigints as their digits. */
export function writeParseTree(tree: unknown): string {
  // Positions are optional, and the parser's "unknown" (2^64 - 1) is no use to anyone.
  return stringify(tree, (key, value: unknown) => (key === 'query_location' ? undefined : value)) ?? 'null';
}

function replaceSpecialDoubles(tree: unknown): unknown {
  if (Array.isArray(tree)) return tree.map(replaceSpecialDoubles);
  if (tree === null || typeof tree !== 'object') return tree;
  const node = tree as AstNode;
  if (node.class === 'CONSTANT' && typeof node.value?.value === 'string' && node.value.value.startsWith(SPECIAL)) {
    const text = node.value.value.slice(SPECIAL.length);
    return {
      class: 'CAST',
      type: 'OPERATOR_CAST',
      alias: node.alias ?? '',
      child: { class: 'CONSTANT', type: 'VALUE_CONSTANT', alias: '', value: { type: { id: 'VARCHAR', type_info: null }, is_null: false, value: text } },
      cast_type: node.value.type,
      try_cast: false,
    };
  }
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, replaceSpecialDoubles(value)]));
}

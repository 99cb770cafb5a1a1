/**
 * DuckDB's parse trees (json_serialize_sql) read and written without losing a digit. JSON.parse
 * would turn every number into a double: 9007199254740993 becomes ...992, a UBIGINT or a HUGEINT
 * half loses its low bits, and the query that runs is not the query that was sent. Here integers
 * past 2^53 become bigints and every other number keeps its text (both survive structuredClone and
 * the planner's rewrites).
 *
 * Double constants become casts from text: SQL spells a double without an exponent the way it
 * spells a DECIMAL (written back, 1.5e0 would come back as 1.5, a DECIMAL(2,1), and -0.0e0 would
 * lose its sign), and JSON cannot spell Infinity or NaN at all. DuckDB folds the cast back into
 * the same constant.
 */
import { isInteger, isSafeNumber, parse, stringify } from 'lossless-json';
import { PARAMETER_FIELD } from '../../../core/query-plan/literals.js';
import { isConstant, type AstNode } from '../../../core/query-plan/parse-tree.js';

/** Marks a double that JSON cannot carry; only ever the value of a DOUBLE or FLOAT constant. */
const SPECIAL = '\u0000double:';

/** A number that is not an integer, as DuckDB wrote it: "1e20" must go back as a double, not as 100000000000000000000. */
interface NumberText {
  $number: string;
}
const isNumberText = (value: unknown): value is NumberText =>
  typeof value === 'object' && value !== null && Object.keys(value).length === 1 && '$number' in value;

/** Reads the JSON of json_serialize_sql. */
export function readParseTree(json: string): unknown {
  // DuckDB writes the non-finite doubles as bare words, which no JSON parser accepts. They can
  // only stand after "value": (a user's text is always inside a JSON string, where a quote is \").
  const text = json.replace(
    /"value":(-?Infinity|NaN)(?=[,}])/g,
    (_, word: string) => `"value":${JSON.stringify(SPECIAL + word)}`,
  );
  const tree = parse(text, null, (digits): number | bigint | NumberText => {
    if (isInteger(digits)) return isSafeNumber(digits) ? Number(digits) : BigInt(digits);
    return { $number: digits };
  });
  return castDoubles(tree);
}

/** Writes a parse tree as JSON for json_deserialize_sql, bigints as their digits. */
export function writeParseTree(tree: unknown): string {
  // Positions are optional, and the parser's "unknown" (2^64 - 1) is no use to anyone; a lifted
  // literal's mark is Berth's (core/query-plan/literals.ts), written as the literal it marks.
  const replacer = (key: string, value: unknown) =>
    key === 'query_location' || key === PARAMETER_FIELD ? undefined : value;
  return (
    stringify(tree, replacer, undefined, [
      { test: isNumberText, stringify: (value) => (value as NumberText).$number },
    ]) ?? 'null'
  );
}

function castDoubles(tree: unknown): unknown {
  if (Array.isArray(tree)) return tree.map(castDoubles);
  if (tree === null || typeof tree !== 'object' || isNumberText(tree)) return tree;
  const node = tree as AstNode;
  const type = isConstant(node) ? node.value?.type : undefined;
  if (isConstant(node) && !node.value.is_null && (type?.id === 'DOUBLE' || type?.id === 'FLOAT')) {
    const value: unknown = node.value.value;
    const text = isNumberText(value)
      ? value.$number
      : typeof value === 'string' && value.startsWith(SPECIAL)
        ? value.slice(SPECIAL.length)
        : String(value);
    return {
      class: 'CAST',
      type: 'OPERATOR_CAST',
      alias: node.alias ?? '',
      child: {
        class: 'CONSTANT',
        type: 'VALUE_CONSTANT',
        alias: '',
        value: { type: { id: 'VARCHAR', type_info: null }, is_null: false, value: text },
      },
      cast_type: type,
      try_cast: false,
    };
  }
  return Object.fromEntries(Object.entries(node).map(([key, value]) => [key, castDoubles(value)]));
}

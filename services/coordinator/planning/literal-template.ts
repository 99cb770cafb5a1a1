/**
 * A statement's key found from its text, without DuckDB's parser: a dashboard's next refresh is the
 * text of the last one with other literals, and parsing it (json_serialize_sql, then its tree read
 * and written as JSON) is the largest part of a cached plan's cost. The text is cut into its
 * literal tokens (strings and plain integers) and the rest, its template; once DuckDB has parsed
 * one text of a template, the parse says which tokens are lifted literals (by their positions in
 * the text) and which stay part of the statement. A text of the same template then has the same
 * statement, with its own values for the lifted literals, provided that each lifted token has the
 * type DuckDB would give it and every other token is the same text.
 *
 * Only texts whose tokens are read the same way here as by DuckDB's lexer get a template: printable
 * ASCII without comments, dollar quotes, parameters, prefixed strings (E'…', X'…', U&'…'),
 * strings that DuckDB would join into one ('a' 'b'), or numbers of any other form (1.5, 1e5,
 * 1_000, 0x1F). Anything else is parsed by DuckDB, as before.
 */
import { PARAMETER_FIELD, type Literal, type LiteralType } from '../../../core/query-plan/literals.js';
import { isConstant, walk, type QueryNode } from '../../../core/query-plan/parse-tree.js';

/** A literal token of a text. */
interface Token {
  /** Offset in the text without its edge spaces. */
  start: number;
  kind: 'string' | 'integer';
  /** The token as written. */
  text: string;
}

/** A text cut into its template (the key) and its literal tokens, in text order. */
export interface TextTemplate {
  key: string;
  tokens: Token[];
}

/** A token of a template: a lifted literal (its place among the literals, its name and type), or text that must be the same. */
type Slot = { index: number; name: string; type: LiteralType } | { text: string };

/** What one parse of a template's text says of every text of that template. */
export interface TemplateStatement {
  shape: string;
  slots: Slot[];
}

/** The binder's edge spaces (sql-binder.ts), ASCII's only: a text with any other character has no template. */
const EDGE_SPACES = /^[ \t\n\r\f\v]+|[ \t\n\r\f\v]+$/g;
const NAME_START = /[A-Za-z_]/;
const NAME_PART = /[A-Za-z0-9_$]/;
const INT32 = 2n ** 31n;
const INT64 = 2n ** 63n;

/** `sql` cut into template and literal tokens; undefined where DuckDB's lexer may read it otherwise. */
export function textTemplate(sql: string): TextTemplate | undefined {
  const text = sql.replace(EDGE_SPACES, '');
  // Printable ASCII only: DuckDB's positions count bytes, and it reads some Unicode spaces as spaces.
  if (/[^\x20-\x7e\t\n\r]/.test(text)) return undefined;
  const tokens: Token[] = [];
  let key = '';
  let i = 0;
  while (i < text.length) {
    const c = text[i]!;
    if (c === '$' || c === '?' || (c === '-' && text[i + 1] === '-') || (c === '/' && text[i + 1] === '*'))
      return undefined;
    if (c === "'") {
      if (i > 0 && /[A-Za-z0-9_&]/.test(text[i - 1]!)) return undefined; // E'…', X'…', U&'…'
      let end = i + 1;
      for (;;) {
        end = text.indexOf("'", end);
        if (end < 0) return undefined;
        if (text[end + 1] !== "'") break;
        end += 2;
      }
      // 'a' 'b' across a line break is one string to DuckDB: no string may follow a string.
      let next = end + 1;
      while (text[next] === ' ' || text[next] === '\t' || text[next] === '\n' || text[next] === '\r') next++;
      if (text[next] === "'") return undefined;
      tokens.push({ start: i, kind: 'string', text: text.slice(i, end + 1) });
      key += '\u0001s';
      i = end + 1;
    } else if (c === '"') {
      let end = i + 1;
      for (;;) {
        end = text.indexOf('"', end);
        if (end < 0) return undefined;
        if (text[end + 1] !== '"') break;
        end += 2;
      }
      key += text.slice(i, end + 1);
      i = end + 1;
    } else if (NAME_START.test(c)) {
      let end = i + 1;
      while (end < text.length && NAME_PART.test(text[end]!)) end++;
      key += text.slice(i, end);
      i = end;
    } else if (c >= '0' && c <= '9') {
      let end = i + 1;
      while (end < text.length && text[end]! >= '0' && text[end]! <= '9') end++;
      if (text[i - 1] === '.' || (end < text.length && /[A-Za-z_.]/.test(text[end]!))) return undefined;
      tokens.push({ start: i, kind: 'integer', text: text.slice(i, end) });
      key += '\u0001i';
      i = end;
    } else {
      key += c;
      i++;
    }
  }
  return { key, tokens };
}

/**
 * What a parse of a text of `template` says of every text of it: the statement's shape, and for
 * each token, the lifted literal it is (the tree's constants marked by liftLiterals, found by
 * position) or the text it must be. Undefined unless each lifted literal is one token of its value
 * (DuckDB places a folded -5 on its minus) that no other constant of the tree came from: a simple
 * CASE copies its operand into every WHEN, and a copy that is not lifted keeps this text's value
 * in the shape.
 */
export function templateStatement(
  template: TextTemplate,
  node: QueryNode,
  shape: string,
  literals: readonly Literal[],
): TemplateStatement | undefined {
  const byStart = new Map(template.tokens.map((token, i) => [token.start, i]));
  const index = new Map(literals.map((l, i) => [l.name, i]));
  const lifted = new Map<number, number>();
  const constants = new Map<number, number>();
  let placed = true;
  walk(node, (n) => {
    if (!isConstant(n)) return;
    const at = byStart.get(Number(n.query_location));
    if (at !== undefined) constants.set(at, (constants.get(at) ?? 0) + 1);
    const name = n[PARAMETER_FIELD];
    if (typeof name !== 'string') return;
    const i = index.get(name);
    if (at === undefined || i === undefined || tokenLiteral(template.tokens[at]!)?.value !== literals[i]!.value)
      placed = false;
    else lifted.set(at, i);
  });
  if (!placed || lifted.size !== literals.length || [...lifted.keys()].some((at) => constants.get(at) !== 1))
    return undefined;
  const slots = template.tokens.map((token, at): Slot => {
    const i = lifted.get(at);
    return i === undefined ? { text: token.text } : { index: i, name: literals[i]!.name, type: literals[i]!.type };
  });
  return { shape, slots };
}

/** The statement of a text of a known template: its lifted literals' values in it, or undefined where a token differs. */
export function statementOf(
  template: TextTemplate,
  known: TemplateStatement,
): { shape: string; literals: Literal[] } | undefined {
  const literals: Literal[] = [];
  for (const [at, slot] of known.slots.entries()) {
    const token = template.tokens[at]!;
    if ('text' in slot) {
      if (token.text !== slot.text) return undefined;
      continue;
    }
    const literal = tokenLiteral(token);
    if (literal?.type !== slot.type) return undefined;
    literals[slot.index] = { name: slot.name, type: literal.type, value: literal.value };
  }
  return { shape: known.shape, literals };
}

/**
 * The constant DuckDB reads a token as: a string's text; an integer as INTEGER within 32 bits and
 * BIGINT within 64, as DuckDB types it (undefined past that, and for leading zeros, whose value's
 * digits are not the token's).
 */
function tokenLiteral(token: Token): { type: LiteralType; value: string } | undefined {
  if (token.kind === 'string') return { type: 'VARCHAR', value: token.text.slice(1, -1).replaceAll("''", "'") };
  if (token.text.length > 1 && token.text.startsWith('0')) return undefined;
  const value = BigInt(token.text);
  if (value < INT32) return { type: 'INTEGER', value: token.text };
  if (value < INT64) return { type: 'BIGINT', value: token.text };
  return undefined;
}

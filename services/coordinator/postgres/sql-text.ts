/**
 * PostgreSQL-flavoured SQL at the level of its tokens: a simple query split into statements, what
 * kind of statement each is, whether it reads the catalog, and the catalog's PostgreSQL spellings
 * DuckDB does not parse rewritten. Never a parser: anything that reaches an engine is parsed there.
 */

import { parseCopy, type CopyOut } from './copy-out.js';

export interface Token {
  kind: 'word' | 'quoted' | 'string' | 'number' | 'param' | 'op' | 'space';
  text: string;
}

/** Tokens of `sql`: quotes, dollar quotes and comments kept whole; an unterminated one runs to the end. */
export function tokenize(sql: string): Token[] {
  const tokens: Token[] = [];
  let i = 0;
  const push = (kind: Token['kind'], end: number) => {
    tokens.push({ kind, text: sql.slice(i, end) });
    i = end;
  };
  const until = (close: string, from: number, doubled: boolean) => {
    for (let j = from; j < sql.length; j++) {
      if (sql.startsWith(close, j)) {
        if (doubled && sql.startsWith(close, j + 1)) j++;
        else return j + close.length;
      }
    }
    return sql.length;
  };
  while (i < sql.length) {
    const c = sql[i]!;
    if (/\s/.test(c)) push('space', i + /^\s+/.exec(sql.slice(i))![0].length);
    else if (sql.startsWith('--', i)) push('space', sql.includes('\n', i) ? sql.indexOf('\n', i) + 1 : sql.length);
    else if (sql.startsWith('/*', i)) push('space', until('*/', i + 2, false));
    else if (c === "'") push('string', until("'", i + 1, true));
    else if ((c === 'E' || c === 'e') && sql[i + 1] === "'") {
      let j = i + 2;
      while (j < sql.length && sql[j] !== "'") j += sql[j] === '\\' ? 2 : 1;
      push('string', Math.min(j + 1, sql.length));
    } else if (c === '"') push('quoted', until('"', i + 1, true));
    else if (c === '$' && /^\$\d+/.test(sql.slice(i))) push('param', i + /^\$\d+/.exec(sql.slice(i))![0].length);
    else if (c === '$' && /^\$[A-Za-z_]*\$/.test(sql.slice(i))) {
      const tag = /^\$[A-Za-z_]*\$/.exec(sql.slice(i))![0];
      push('string', until(tag, i + tag.length, false));
    } else if (/[A-Za-z_\u0080-\uffff]/.test(c)) push('word', i + /^[\w$\u0080-\uffff]+/.exec(sql.slice(i))![0].length);
    else if (/\d/.test(c) || (c === '.' && /\d/.test(sql[i + 1] ?? '')))
      push('number', i + /^(\d*\.?\d*(e[-+]?\d+)?)/i.exec(sql.slice(i))![0].length || 1);
    else if (sql.startsWith('::', i)) push('op', i + 2);
    else if (/[+\-*/<>=~!@#%^&|`?]/.test(c)) push('op', i + /^[+\-*/<>=~!@#%^&|`?]+/.exec(sql.slice(i))![0].length);
    else push('op', i + 1);
  }
  return tokens;
}

/** The statements of a simple query, split at semicolons outside quotes and comments, each as DuckDB reads it in the whole; empty ones kept. */
export function splitStatements(sql: string): string[] {
  const statements: string[] = [];
  let current = '';
  for (const token of tokenize(sql)) {
    if (token.kind === 'op' && token.text === ';') {
      // DuckDB reads a U+00A0 as a space unless it ends the text (sql-binder.ts): before a semicolon, it is one.
      statements.push(current.replace(/\u00a0$/, ' '));
      current = '';
    } else current += token.text;
  }
  if (current.trim() !== '' || statements.length === 0) statements.push(current);
  return statements;
}

const meaningful = (sql: string) => tokenize(sql).filter((t) => t.kind !== 'space');
const word = (t: Token | undefined) =>
  t?.kind === 'word' ? t.text.toLowerCase() : t?.kind === 'quoted' ? t.text.slice(1, -1) : undefined;

/** What a statement is, as the session decides what to do with it. */
export type StatementKind =
  | { kind: 'empty' }
  | { kind: 'begin' | 'commit' | 'rollback' | 'no-op'; tag: string }
  | { kind: 'set'; name: string; value: string | undefined }
  | { kind: 'show'; name: string }
  | { kind: 'query' }
  | { kind: 'catalog' }
  | { kind: 'write'; command: string }
  | { kind: 'copy'; copy: CopyOut }
  | { kind: 'refused'; code: string; message: string }
  | { kind: 'unsupported'; command: string };

const WRITES = new Set(
  'insert update delete merge create drop alter truncate grant revoke vacuum analyze cluster reindex comment lock call do refresh import security'.split(
    ' ',
  ),
);
const NO_OPS: Record<string, string> = {
  savepoint: 'SAVEPOINT',
  release: 'RELEASE',
  listen: 'LISTEN',
  unlisten: 'UNLISTEN',
};

/** Names that ask the catalog or the session, not Berth's tables. */
const CATALOG_WORDS = new Set([
  'pg_catalog',
  'information_schema',
  'version',
  'current_database',
  'current_catalog',
  'current_schema',
  'current_schemas',
  'current_user',
  'current_role',
  'session_user',
  'format_type',
  'obj_description',
  'col_description',
  'shobj_description',
  'has_table_privilege',
  'has_schema_privilege',
  'has_database_privilege',
  'has_any_column_privilege',
  'to_regclass',
  'to_regtype',
  'txid_current',
  'inet_server_addr',
  'inet_server_port',
]);

export function classify(sql: string): StatementKind {
  const tokens = meaningful(sql);
  const first = word(tokens[0]);
  if (tokens.length === 0) return { kind: 'empty' };
  switch (first) {
    case 'begin':
    case 'start':
      return { kind: 'begin', tag: 'BEGIN' };
    case 'commit':
    case 'end':
      return { kind: 'commit', tag: 'COMMIT' };
    case 'rollback':
    case 'abort':
      // ROLLBACK TO SAVEPOINT stays in the transaction.
      return word(tokens[1]) === 'to' ? { kind: 'no-op', tag: 'ROLLBACK' } : { kind: 'rollback', tag: 'ROLLBACK' };
    case 'set':
      return setStatement(tokens.slice(1));
    case 'reset':
      return { kind: 'set', name: word(tokens[1]) ?? 'all', value: undefined };
    case 'show':
      return {
        kind: 'show',
        name: tokens
          .slice(1)
          .map((t) => word(t) ?? t.text)
          .join(' ')
          .toLowerCase(),
      };
    case 'discard':
      return { kind: 'no-op', tag: `DISCARD ${(word(tokens[1]) ?? 'ALL').toUpperCase()}` };
    case 'deallocate':
      return { kind: 'no-op', tag: 'DEALLOCATE' };
    case 'copy': {
      const copy = parseCopy(tokenize(sql));
      if (copy === 'copy from') return { kind: 'write', command: 'COPY' };
      return 'query' in copy ? { kind: 'copy', copy } : { kind: 'refused', ...copy };
    }
  }
  if (first !== undefined && NO_OPS[first]) return { kind: 'no-op', tag: NO_OPS[first] };
  if (first !== undefined && WRITES.has(first)) return { kind: 'write', command: first.toUpperCase() };
  if (
    first === 'select' ||
    first === 'with' ||
    first === 'values' ||
    first === 'table' ||
    first === 'from' ||
    tokens[0]!.text === '('
  )
    return readsCatalog(tokens) ? { kind: 'catalog' } : { kind: 'query' };
  return { kind: 'unsupported', command: (first ?? tokens[0]!.text).toUpperCase() };
}

function readsCatalog(tokens: Token[]): boolean {
  return tokens.some((t) => {
    const name = word(t);
    return name !== undefined && (CATALOG_WORDS.has(name) || name.startsWith('pg_'));
  });
}

/** `SET [SESSION | LOCAL] name {TO | =} value`, `SET TIME ZONE value`, and SET forms Berth takes as no-ops. */
function setStatement(tokens: Token[]): StatementKind {
  let rest = tokens;
  if (['session', 'local'].includes(word(rest[0]) ?? '') && word(rest[1]) !== 'characteristics') rest = rest.slice(1);
  const head = word(rest[0]);
  if (head === 'transaction' || head === 'session') return { kind: 'no-op', tag: 'SET' };
  if (head === 'time' && word(rest[1]) === 'zone')
    return { kind: 'set', name: 'timezone', value: valueText(rest.slice(2)) };
  const name = rest
    .slice(
      0,
      rest.findIndex((t) => t.text === '=' || word(t) === 'to'),
    )
    .map((t) => word(t) ?? t.text)
    .join('');
  const at = rest.findIndex((t) => t.text === '=' || word(t) === 'to');
  if (at < 1) return { kind: 'unsupported', command: 'SET' };
  const value = valueText(rest.slice(at + 1));
  return { kind: 'set', name: name.toLowerCase(), value: value?.toLowerCase() === 'default' ? undefined : value };
}

/** A SET value as PostgreSQL keeps it: quotes off, a list joined by commas. */
function valueText(tokens: Token[]): string | undefined {
  const parts = tokens.filter((t) => t.text !== ',');
  if (parts.length === 0) return undefined;
  return parts
    .map((t) =>
      t.kind === 'string'
        ? t.text.slice(1, -1).replace(/''/g, "'")
        : t.kind === 'quoted'
          ? t.text.slice(1, -1)
          : t.text,
    )
    .join(', ');
}

/** Words that may follow a FROM item and are no alias. */
const RESERVED_AFTER_FROM = new Set([
  'where',
  'join',
  'left',
  'right',
  'inner',
  'full',
  'cross',
  'on',
  'group',
  'order',
  'limit',
  'union',
  'natural',
  'using',
  'having',
  'window',
  'offset',
  'except',
  'intersect',
]);

const REG_TYPES = new Set(['regclass', 'regtype', 'regnamespace', 'regproc', 'regprocedure', 'regoper', 'regrole']);

/**
 * A catalog statement in the words the catalog's DuckDB reads: `pg_catalog.` and
 * `information_schema.` dropped (its search path finds Berth's own catalog tables first),
 * `OPERATOR(pg_catalog.~)` as `~`, COLLATE clauses dropped, a `'name'::regclass` as the
 * relation's oid and any other reg* cast dropped.
 */
export function catalogDialect(sql: string): string {
  const tokens = tokenize(sql);
  const out: string[] = [];
  /** Positions of aliases that name their function's column too. */
  const columnAliases = new Set<number>();
  const next = (i: number) => {
    let j = i + 1;
    while (tokens[j]?.kind === 'space') j++;
    return j;
  };
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    const name = word(t);
    if ((name === 'pg_catalog' || name === 'information_schema') && tokens[next(i)]?.text === '.') {
      i = next(i);
      continue;
    }
    if (name === 'operator' && tokens[next(i)]?.text === '(') {
      let j = next(i);
      const inner: string[] = [];
      while (j < tokens.length && tokens[j]!.text !== ')') {
        if (tokens[j]!.kind === 'op' && tokens[j]!.text !== '(' && tokens[j]!.text !== '.') inner.push(tokens[j]!.text);
        j++;
      }
      out.push(` ${inner.join('')} `);
      i = j;
      continue;
    }
    if (name === 'collate') {
      let j = next(i);
      if (word(tokens[j]) === 'pg_catalog' && tokens[next(j)]?.text === '.') j = next(next(j));
      i = j;
      continue;
    }
    // PostgreSQL names a set-returning function's column after its alias: `generate_series(…) s`
    // reads as s(s) in DuckDB's words.
    if (name === 'generate_series' && tokens[next(i)]?.text === '(') {
      let depth = 0;
      let j = next(i);
      for (; j < tokens.length; j++) {
        if (tokens[j]!.text === '(') depth++;
        else if (tokens[j]!.text === ')' && --depth === 0) break;
      }
      let k = next(j);
      if (word(tokens[k]) === 'as') k = next(k);
      const alias = tokens[k];
      if (alias?.kind === 'word' && !RESERVED_AFTER_FROM.has(alias.text.toLowerCase()) && tokens[next(k)]?.text !== '(')
        columnAliases.add(k);
    }
    if (t.text === '::') {
      let j = next(i);
      if (word(tokens[j]) === 'pg_catalog' && tokens[next(j)]?.text === '.') j = next(next(j));
      if (REG_TYPES.has(word(tokens[j]) ?? '')) {
        const previous = out.length - 1;
        if (word(tokens[j]) === 'regclass' && previous >= 0 && out[previous]!.startsWith("'"))
          out[previous] = `regclass_oid(${out[previous]})`;
        i = j;
        continue;
      }
    }
    out.push(t.text);
    if (columnAliases.has(i)) out.push(`(${t.text})`);
  }
  return out.join('');
}

/**
 * A query with its `public.` (and `berth.public.`) qualifiers dropped: Berth's tables are the
 * database's one schema, and BI tools write every name qualified (`"public"."events"."service"`),
 * which the planner refuses as it refuses any qualified name. A qualifier after a dot (a struct's
 * field called public) stays.
 */
export function withoutSchema(sql: string): string {
  const tokens = tokenize(sql);
  const out: string[] = [];
  const name = (t: Token | undefined) =>
    t?.kind === 'word' ? t.text.toLowerCase() : t?.kind === 'quoted' ? t.text.slice(1, -1) : undefined;
  let previous: Token | undefined;
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i]!;
    const afterDot = previous?.text === '.';
    if (
      !afterDot &&
      name(t) === 'berth' &&
      tokens[i + 1]?.text === '.' &&
      name(tokens[i + 2]) === 'public' &&
      tokens[i + 3]?.text === '.'
    ) {
      i += 3;
      continue;
    }
    if (
      !afterDot &&
      name(t) === 'public' &&
      tokens[i + 1]?.text === '.' &&
      tokens[i + 2] &&
      tokens[i + 2]!.kind !== 'space'
    ) {
      i += 1;
      continue;
    }
    out.push(t.text);
    if (t.kind !== 'space') previous = t;
  }
  return out.join('');
}

/**
 * `COPY … TO STDOUT`, the way psql's `\copy`, psycopg's `cursor.copy()` and export tools read a
 * whole answer: the statement's options read from its tokens, and each row written as PostgreSQL
 * writes it in the text or CSV format (docs: "COPY", File Formats). The rows themselves come from
 * the query COPY wraps, run like any other. COPY FROM is a write and stays refused; a file on the
 * server, BINARY and the FORCE_* options are refused with what to do instead.
 */

/** A token as sql-text.ts makes them (its `tokenize`), spaces and comments included. */
interface Token {
  kind: string;
  text: string;
}

/** What a `COPY … TO STDOUT` asks for. */
export interface CopyOut {
  /** The query whose rows are copied: `COPY (query)`, or `SELECT cols FROM table` for `COPY table (cols)`. */
  query: string;
  format: 'text' | 'csv';
  header: boolean;
  delimiter: string;
  null: string;
  quote: string;
  escape: string;
}

/** A COPY Berth does not run, with its SQLSTATE. */
export interface CopyRefusal {
  code: string;
  message: string;
}

const word = (t: Token | undefined) =>
  t?.kind === 'word' ? t.text.toLowerCase() : t?.kind === 'quoted' ? t.text.slice(1, -1) : undefined;
/** A closed string literal's value: '…' with '' for a quote, or E'…' with its backslash escapes. */
function stringValue(t: Token | undefined): string | undefined {
  if (t?.kind !== 'string' || t.text.length < 2 || !t.text.endsWith("'")) return undefined;
  if (t.text.startsWith("'")) return t.text.slice(1, -1).replace(/''/g, "'");
  if (!/^[Ee]'/.test(t.text) || t.text.length < 3) return undefined;
  return t.text
    .slice(2, -1)
    .replace(/''/g, "'")
    .replace(/\\(x[0-9A-Fa-f]{1,2}|[0-7]{1,3}|.)/g, (_, e: string) =>
      e[0] === 'x'
        ? String.fromCharCode(parseInt(e.slice(1), 16))
        : /^[0-7]/.test(e)
          ? String.fromCharCode(parseInt(e, 8))
          : (BACKSLASH_ESCAPES[e] ?? e),
    );
}
const BACKSLASH_ESCAPES: Record<string, string> = { b: '\b', f: '\f', n: '\n', r: '\r', t: '\t', v: '\v' };

/** A COPY statement's meaning from its tokens (spaces and comments included), or why Berth refuses it. */
export function parseCopy(all: Token[]): CopyOut | CopyRefusal | 'copy from' {
  const t = all.filter((x) => x.kind !== 'space');
  if (t.at(-1)?.text === ';') t.pop(); // as a statement parsed alone may end
  let i = 1;
  let query: string;
  if (t[i]?.text === '(') {
    const open = all.indexOf(t[i]!);
    let depth = 0;
    let close = open;
    for (; close < all.length; close++) {
      if (all[close]!.text === '(') depth++;
      else if (all[close]!.text === ')' && --depth === 0) break;
    }
    if (close === all.length) return syntax('COPY’s query has no closing parenthesis');
    query = all
      .slice(open + 1, close)
      .map((x) => x.text)
      .join('')
      .trim();
    i = t.indexOf(all[close]!) + 1;
  } else {
    const name: string[] = [];
    while (t[i] && (t[i]!.kind === 'word' || t[i]!.kind === 'quoted' || t[i]!.text === '.') && !isToOrFrom(t[i]))
      name.push(t[i++]!.text);
    if (name.length === 0) return syntax('COPY names no table and no query');
    let columns = '*';
    if (t[i]?.text === '(') {
      const list: string[] = [];
      for (i++; t[i] && t[i]!.text !== ')'; i++) list.push(t[i]!.text);
      columns = list.join(' ').replace(/ ,/g, ',');
      i++;
    }
    query = `SELECT ${columns} FROM ${name.join('')}`;
  }
  const direction = word(t[i++]);
  if (direction === 'from') return 'copy from';
  if (direction !== 'to') return syntax('COPY needs TO STDOUT after its query');
  if (word(t[i]) !== 'stdout')
    return {
      code: '0A000',
      message: 'Berth copies to STDOUT only: psql’s \\copy writes the file on the client’s side',
    };
  i++;
  const options = readOptions(t.slice(i));
  if ('code' in options) return options;
  const format = options.format ?? 'text';
  if (format === 'binary') return { code: '0A000', message: 'Berth has no binary COPY: use FORMAT text or csv' };
  if (format !== 'text' && format !== 'csv')
    return { code: '22023', message: `COPY format "${format}" not recognized` };
  const copy: CopyOut = {
    query,
    format,
    header: options.header ?? false,
    delimiter: options.delimiter ?? (format === 'csv' ? ',' : '\t'),
    null: options.null ?? (format === 'csv' ? '' : '\\N'),
    quote: options.quote ?? '"',
    escape: options.escape ?? options.quote ?? '"',
  };
  return refusedOptions(copy, options) ?? copy;
}

/** The combinations PostgreSQL refuses (its ProcessCopyOptions), in its words. */
function refusedOptions(copy: CopyOut, asked: Options): CopyRefusal | undefined {
  const invalid = (message: string): CopyRefusal => ({ code: '22023', message });
  const oneByte = (s: string) => Buffer.byteLength(s) === 1;
  if (!oneByte(copy.delimiter)) return invalid('COPY delimiter must be a single one-byte character');
  if (/[\r\n]/.test(copy.delimiter)) return invalid('COPY delimiter cannot be newline or carriage return');
  if (/[\r\n]/.test(copy.null)) return invalid('COPY null representation cannot use newline or carriage return');
  if (copy.format === 'text' && '\\.abcdefghijklmnopqrstuvwxyz0123456789'.includes(copy.delimiter))
    return invalid(`COPY delimiter cannot be "${copy.delimiter}"`);
  if (copy.format === 'text' && asked.quote !== undefined)
    return { code: '0A000', message: 'COPY quote available only in CSV mode' };
  if (copy.format === 'text' && asked.escape !== undefined)
    return { code: '0A000', message: 'COPY escape available only in CSV mode' };
  if (copy.format === 'csv') {
    if (!oneByte(copy.quote)) return invalid('COPY quote must be a single one-byte character');
    if (!oneByte(copy.escape)) return invalid('COPY escape must be a single one-byte character');
    if (copy.delimiter === copy.quote) return invalid('COPY delimiter and quote must be different');
    if (copy.null.includes(copy.quote)) return invalid('CSV quote character must not appear in the NULL specification');
  }
  if (copy.null.includes(copy.delimiter))
    return invalid('COPY delimiter character must not appear in the NULL specification');
  return undefined;
}

const isToOrFrom = (t: Token | undefined) => t?.kind === 'word' && ['to', 'from'].includes(t.text.toLowerCase());
const syntax = (message: string): CopyRefusal => ({ code: '42601', message });

interface Options {
  format?: string;
  header?: boolean;
  delimiter?: string;
  null?: string;
  quote?: string;
  escape?: string;
}

/** `[WITH] (name [value], …)`, or the older `[WITH] [BINARY] [DELIMITER [AS] 'c'] [NULL [AS] 's'] [CSV [HEADER] …]`. */
function readOptions(t: Token[]): Options | CopyRefusal {
  let i = word(t[0]) === 'with' ? 1 : 0;
  const options: Options = {};
  const set = (name: string, value: Token | undefined): CopyRefusal | undefined => {
    if (name in options) return syntax('conflicting or redundant options');
    const text = stringValue(value) ?? word(value) ?? value?.text;
    switch (name) {
      case 'format':
        if (text === undefined) return syntax('COPY option FORMAT needs a value');
        options.format = text.toLowerCase();
        return;
      case 'header': {
        const flag = (text ?? 'true').toLowerCase();
        if (!['true', 'on', '1', 'false', 'off', '0'].includes(flag))
          return { code: '22023', message: `header requires a Boolean value, not "${text}"` };
        options.header = ['true', 'on', '1'].includes(flag);
        return;
      }
      case 'delimiter':
      case 'null':
      case 'quote':
      case 'escape':
        if (stringValue(value) === undefined) return syntax(`COPY option ${name} needs a quoted string`);
        options[name] = stringValue(value);
        return;
      default:
        return {
          code: '0A000',
          message: `Berth does not take the COPY option ${name.toUpperCase()}: values are quoted where CSV needs it, NULL as the NULL option says`,
        };
    }
  };
  if (t[i]?.text === '(') {
    for (i++; i < t.length && t[i]!.text !== ')'; i++) {
      const name = word(t[i]);
      if (name === undefined) return syntax(`COPY option expected, not "${t[i]!.text}"`);
      const value = t[i + 1] && t[i + 1]!.text !== ',' && t[i + 1]!.text !== ')' ? t[++i] : undefined;
      const refused = set(name, value);
      if (refused) return refused;
      if (t[i + 1]?.text === ',') i++;
    }
    if (i >= t.length) return syntax('COPY options have no closing parenthesis');
    return i === t.length - 1 ? options : syntax(`nothing may follow COPY's options, not "${t[i + 1]!.text}"`);
  }
  for (; i < t.length; i++) {
    const name = word(t[i]);
    let refused: CopyRefusal | undefined;
    if (name === 'binary' || name === 'csv') refused = set('format', { kind: 'word', text: name });
    else if (name === 'header') refused = set('header', undefined);
    else if (name === 'force') refused = set(`force_${word(t[i + 1]) ?? ''}`, undefined);
    else if (name === 'delimiter' || name === 'null' || name === 'quote' || name === 'escape') {
      if (word(t[i + 1]) === 'as') i++;
      refused = set(name, t[++i]);
    } else return syntax(`COPY option expected, not "${t[i]!.text}"`);
    if (refused) return refused;
  }
  return options;
}

/** One row of COPY's output, its line end included: `values` as their text encodings, null for NULL. */
export function copyLine(copy: CopyOut, values: readonly (string | null)[]): string {
  const alone = values.length === 1;
  const fields = values.map((v) => (copy.format === 'csv' ? csvField(copy, v, alone) : textField(copy, v)));
  return `${fields.join(copy.delimiter)}\n`;
}

/** The header line of a CSV COPY: the column names, quoted as values are. */
export const copyHeader = (copy: CopyOut, columns: readonly string[]) =>
  copy.format === 'csv' ? copyLine(copy, columns) : `${columns.map((c) => textField(copy, c)).join(copy.delimiter)}\n`;

const TEXT_ESCAPES: Record<string, string> = {
  '\\': '\\\\',
  '\b': '\\b',
  '\f': '\\f',
  '\n': '\\n',
  '\r': '\\r',
  '\t': '\\t',
  '\v': '\\v',
};

function textField(copy: CopyOut, value: string | null): string {
  if (value === null) return copy.null;
  let out = '';
  for (const c of value) out += TEXT_ESCAPES[c] ?? (c === copy.delimiter ? `\\${c}` : c);
  return out;
}

/** `alone`: the row's only field, where `\.` alone would read as the end of the data. */
function csvField(copy: CopyOut, value: string | null, alone: boolean): string {
  if (value === null) return copy.null;
  const needsQuotes =
    value === copy.null ||
    (alone && value === '\\.') ||
    value.includes(copy.delimiter) ||
    value.includes(copy.quote) ||
    value.includes('\n') ||
    value.includes('\r');
  if (!needsQuotes) return value;
  let out = '';
  for (const c of value) out += c === copy.quote || c === copy.escape ? `${copy.escape}${c}` : c;
  return `${copy.quote}${out}${copy.quote}`;
}

/**
 * The PostgreSQL front's pure parts, without a server: SCRAM against node-postgres' own client
 * implementation, the framing's refusals, the statement splitter and classifier, the catalog's
 * dialect rewrite, and the type mapping's text and binary forms.
 */
import { createRequire } from 'node:module';
import { describe, expect, it } from 'vitest';
import { decodeMessage, MessageReader, ProtocolViolation } from '../services/coordinator/postgres/frontend-messages.js';
import { OID, parameterText, pgColumnType } from '../services/coordinator/postgres/pg-types.js';
import { ScramExchange, scramSecret } from '../services/coordinator/postgres/scram.js';
import { copyLine, type CopyOut } from '../services/coordinator/postgres/copy-out.js';
import { catalogDialect, classify, splitStatements, withoutSchema } from '../services/coordinator/postgres/sql-text.js';

interface SaslSession {
  response: string;
}
const sasl = createRequire(import.meta.url)('pg/lib/crypto/sasl.js') as {
  startSession(mechanisms: string[]): SaslSession;
  continueSession(session: SaslSession, password: string, serverData: string): Promise<void>;
  finalizeSession(session: SaslSession, serverData: string): void;
};

/** What a COPY statement asks for, or how it is classified when it is no COPY to run. */
const copy = (sql: string) => {
  const kind = classify(sql);
  return kind.kind === 'copy' ? kind.copy : kind;
};
const copyOptions = (sql: string): CopyOut => {
  const kind = classify(sql);
  if (kind.kind !== 'copy') throw new Error(`not a COPY to run: ${sql}`);
  return kind.copy;
};

describe('SCRAM-SHA-256', () => {
  const secret = scramSecret('the-cluster-token-of-at-least-32-bytes');

  it("lets node-postgres' client in with the token, and checks the server back", async () => {
    const client = sasl.startSession(['SCRAM-SHA-256']);
    const server = new ScramExchange(secret);
    const serverFirst = server.first(client.response);
    await sasl.continueSession(client, 'the-cluster-token-of-at-least-32-bytes', serverFirst);
    const serverFinal = server.final(client.response);
    expect(serverFinal).toMatch(/^v=/);
    expect(() => sasl.finalizeSession(client, serverFinal!)).not.toThrow();
  });

  it('refuses another password', async () => {
    const client = sasl.startSession(['SCRAM-SHA-256']);
    const server = new ScramExchange(secret);
    await sasl.continueSession(client, 'a-wrong-password', server.first(client.response));
    expect(server.final(client.response)).toBeUndefined();
  });
});

describe('framing', () => {
  it('cuts packets out of chunks that split them anywhere', () => {
    const reader = new MessageReader(1024);
    reader.startup = false;
    const query = Buffer.from('Q\0\0\0\x0dSELECT 1\0');
    reader.push(query.subarray(0, 3));
    expect(reader.next()).toBeUndefined();
    reader.push(Buffer.concat([query.subarray(3), query.subarray(0, 6)]));
    const packet = reader.next()!;
    expect(decodeMessage(packet.type, packet.body)).toEqual({ type: 'query', sql: 'SELECT 1' });
    expect(reader.next()).toBeUndefined(); // the next one's first 6 bytes only
    expect(reader.buffered).toBe(6);
  });

  it('refuses a length past the limit before buffering it, and one shorter than itself', () => {
    const reader = new MessageReader(1024);
    reader.startup = false;
    reader.push(Buffer.from([0x51, 0x7f, 0xff, 0xff, 0xff]));
    expect(() => reader.next()).toThrow(ProtocolViolation);
    const short = new MessageReader(1024);
    short.push(Buffer.from([0, 0, 0, 2]));
    expect(() => short.next()).toThrow(ProtocolViolation);
  });

  it('refuses a Bind whose counts claim more than its body holds', () => {
    const body = Buffer.concat([Buffer.from('\0\0'), Buffer.from([0x7f, 0xff])]);
    expect(() => decodeMessage('B', body)).toThrow(ProtocolViolation);
    expect(() => decodeMessage('P', Buffer.from('name'))).toThrow(ProtocolViolation);
    expect(() => decodeMessage('z', Buffer.alloc(0))).toThrow(ProtocolViolation);
  });
});

describe('statements', () => {
  it('splits a simple query at semicolons outside quotes, comments and dollar quotes', () => {
    expect(
      splitStatements(`SELECT ';' AS a; -- x;y\nSELECT "a;b" FROM t /* ; */; SELECT $$;$$, E'\\';'`).map((s) =>
        s.trim(),
      ),
    ).toEqual([`SELECT ';' AS a`, `-- x;y\nSELECT "a;b" FROM t /* ; */`, `SELECT $$;$$, E'\\';'`]);
  });

  it('splits a statement off the U+00A0 before its semicolon, which DuckDB reads as a space there alone', () => {
    // DuckDB names the first column k (the U+00A0 is not the text's end), the second "k\u00a0" (it is).
    expect(splitStatements('SELECT 1 AS k\u00a0; SELECT 2 AS k\u00a0')).toEqual([
      'SELECT 1 AS k ',
      ' SELECT 2 AS k\u00a0',
    ]);
  });

  it('tells queries, catalog reads, settings, transactions and writes apart', () => {
    expect(classify('  select 1')).toEqual({ kind: 'query' });
    expect(classify('SELECT * FROM pg_catalog.pg_class')).toEqual({ kind: 'catalog' });
    expect(classify('select version()')).toEqual({ kind: 'catalog' });
    expect(classify('SELECT user_id FROM events')).toEqual({ kind: 'query' });
    expect(classify("SET statement_timeout TO '5s'")).toEqual({ kind: 'set', name: 'statement_timeout', value: '5s' });
    expect(classify('SET SESSION TIME ZONE UTC')).toEqual({ kind: 'set', name: 'timezone', value: 'UTC' });
    expect(classify('set extra_float_digits = 3')).toEqual({ kind: 'set', name: 'extra_float_digits', value: '3' });
    expect(classify('RESET ALL')).toEqual({ kind: 'set', name: 'all', value: undefined });
    expect(classify('SHOW TimeZone')).toEqual({ kind: 'show', name: 'timezone' });
    expect(classify('BEGIN READ ONLY')).toEqual({ kind: 'begin', tag: 'BEGIN' });
    expect(classify('insert into events values (1)')).toEqual({ kind: 'write', command: 'INSERT' });
    expect(classify('EXPLAIN SELECT 1')).toEqual({ kind: 'unsupported', command: 'EXPLAIN' });
    expect(classify(' -- nothing\n')).toEqual({ kind: 'empty' });
  });

  it('reads what a COPY … TO STDOUT asks for, in either option syntax', () => {
    expect(copy('COPY (SELECT a FROM t WHERE (b > 1)) TO STDOUT')).toEqual({
      query: 'SELECT a FROM t WHERE (b > 1)',
      format: 'text',
      header: false,
      delimiter: '\t',
      null: '\\N',
      quote: '"',
      escape: '"',
    });
    expect(copy("copy public.events (service, status) to stdout with (format csv, header true, null 'NA')")).toEqual({
      query: 'SELECT service, status FROM public.events',
      format: 'csv',
      header: true,
      delimiter: ',',
      null: 'NA',
      quote: '"',
      escape: '"',
    });
    expect(copy("COPY t TO STDOUT WITH CSV HEADER DELIMITER AS '|' QUOTE '''' ESCAPE '\\'")).toMatchObject({
      format: 'csv',
      header: true,
      delimiter: '|',
      quote: "'",
      escape: '\\',
    });
    expect(copy("COPY t TO STDOUT (FORMAT csv, ESCAPE '//')")).toMatchObject({ kind: 'refused', code: '22023' });
    expect(copy('COPY t TO STDOUT;')).toMatchObject({ query: 'SELECT * FROM t', format: 'text' });
    expect(copy("COPY t TO STDOUT (FORMAT csv, DELIMITER E'\\t')")).toMatchObject({ delimiter: '\t' });
    // What PostgreSQL refuses, Berth refuses, with PostgreSQL's SQLSTATE.
    const refusals: [string, string][] = [
      ["COPY t TO STDOUT (DELIMITER 'n')", '22023'],
      ["COPY t TO STDOUT (DELIMITER '§')", '22023'],
      ["COPY t TO STDOUT (NULL 'a|b', DELIMITER '|')", '22023'],
      [`COPY t TO STDOUT (QUOTE '"')`, '0A000'],
      ["COPY t TO STDOUT (FORMAT csv, QUOTE ',')", '22023'],
      ['COPY t TO STDOUT (FORMAT csv) DROP TABLE x', '42601'],
      ['COPY t TO STDOUT (FORMAT csv, FORMAT text)', '42601'],
      ["COPY t TO STDOUT (DELIMITER 'ab", '42601'],
      ['COPY t TO STDOUT CSV FORCE QUOTE *', '0A000'],
    ];
    for (const [sql, code] of refusals) expect({ sql, ...copy(sql) }).toMatchObject({ sql, kind: 'refused', code });
    expect(copy('COPY t FROM STDIN')).toEqual({ kind: 'write', command: 'COPY' });
    expect(copy("COPY t TO STDOUT (DELIMITER ';;')")).toMatchObject({ kind: 'refused', code: '22023' });
    expect(copy('COPY t TO STDOUT (FORCE_QUOTE *)')).toMatchObject({ kind: 'refused', code: '0A000' });
    expect(copy('COPY (SELECT 1 TO STDOUT')).toMatchObject({ kind: 'refused', code: '42601' });
  });

  it('writes COPY lines as PostgreSQL does: text escapes, CSV quotes, and \\. quoted only alone', () => {
    // Each format's defaults, as a COPY without options reads them.
    const text = copyOptions('COPY t TO STDOUT');
    const csv = copyOptions('COPY t TO STDOUT (FORMAT csv)');
    expect(copyLine(text, ['a\tb', 'c\\d\ne', null])).toBe('a\\tb\tc\\\\d\\ne\t\\N\n');
    expect(copyLine({ ...text, delimiter: '|' }, ['a|b'])).toBe('a\\|b\n');
    expect(copyLine(csv, ['a,b', 'say "hi"', '', null])).toBe('"a,b","say ""hi""","",\n');
    expect(copyLine(csv, ['\\.', 'x'])).toBe('\\.,x\n');
    expect(copyLine(csv, ['\\.'])).toBe('"\\."\n');
  });

  it('drops the one schema’s qualifier BI tools write, and nothing that only looks like it', () => {
    expect(
      withoutSchema('SELECT "public"."events"."service" FROM "public"."events" JOIN berth.public.t USING (a)'),
    ).toBe('SELECT "events"."service" FROM "events" JOIN t USING (a)');
    expect(withoutSchema("SELECT s.public.x, 'public.events' FROM public_events")).toBe(
      "SELECT s.public.x, 'public.events' FROM public_events",
    );
  });

  it("rewrites the catalog's PostgreSQL spellings into DuckDB's", () => {
    expect(
      catalogDialect(
        "SELECT c.oid FROM pg_catalog.pg_class c WHERE c.relname OPERATOR(pg_catalog.~) '^(events)$' COLLATE pg_catalog.default",
      ),
    ).toBe("SELECT c.oid FROM pg_class c WHERE c.relname  ~  '^(events)$' ");
    expect(
      catalogDialect("SELECT 1 WHERE d.classoid = 'pg_class'::regclass AND c.oid::pg_catalog.regclass IS NULL"),
    ).toBe("SELECT 1 WHERE d.classoid = regclass_oid('pg_class') AND c.oid IS NULL");
    expect(catalogDialect('SELECT s FROM pg_catalog.generate_series(0, 3) s')).toBe(
      'SELECT s FROM generate_series(0, 3) s(s)',
    );
  });
});

describe('types', () => {
  it('gives numeric its precision and scale, and integers past int8 as numeric', () => {
    expect(pgColumnType('DECIMAL(18,3)')).toMatchObject({ oid: OID.numeric, modifier: ((18 << 16) | 3) + 4 });
    expect(pgColumnType('HUGEINT').oid).toBe(OID.numeric);
    expect(pgColumnType('UINTEGER').oid).toBe(OID.int8);
    expect(pgColumnType('VARCHAR[]').oid).toBe(1009);
    expect(pgColumnType('STRUCT("a" INTEGER)').oid).toBe(OID.json);
    expect(pgColumnType('TIMESTAMP_NS').oid).toBe(OID.text);
  });

  it('writes values in PostgreSQL text form, every digit kept', () => {
    expect(pgColumnType('DECIMAL(18,3)').text(1.5)).toBe('1.500');
    expect(pgColumnType('DECIMAL(38,10)').text('12345678901234567890.1234567890')).toBe(
      '12345678901234567890.1234567890',
    );
    expect(pgColumnType('FLOAT').text(Math.fround(0.1))).toBe('0.1');
    expect(pgColumnType('DOUBLE').text(-0)).toBe('-0');
    expect(pgColumnType('DOUBLE').text('NaN')).toBe('NaN');
    expect(pgColumnType('BOOLEAN').text(true)).toBe('t');
    expect(pgColumnType('BLOB').text('\\x00\\xFFab')).toBe('\\x00ff6162');
    expect(pgColumnType('INTERVAL').text({ months: 14, days: 3, micros: '14706789000' } as never)).toBe(
      '1 year 2 mons 3 days 04:05:06.789',
    );
    expect(pgColumnType('VARCHAR[]').text(['a b', null, 'c"d', 'NULL', ''])).toBe('{"a b",NULL,"c\\"d","NULL",""}');
  });

  it('writes binary forms a client reads back to the same values', () => {
    for (const value of ['0', '-1.5', '12345678901234567890.1234567890', '0.0001', '-10000.00'])
      expect(parameterText(OID.numeric, pgColumnType('DECIMAL(38,10)').binary!(value))).toBe(value);
    expect(parameterText(OID.timestamp, pgColumnType('TIMESTAMP').binary!('2026-11-01 12:34:56.789'))).toBe(
      '2026-11-01 12:34:56.789000',
    );
    expect(parameterText(OID.int8, pgColumnType('BIGINT').binary!('9223372036854775807'))).toBe('9223372036854775807');
    expect(parameterText(OID.date, pgColumnType('DATE').binary!('1999-12-31'))).toBe('1999-12-31');
  });
});
